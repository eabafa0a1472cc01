import gc

import pytest


@pytest.fixture(autouse=True)
def collect_garbage():
    # The budget counts every tensor of the process: models of earlier tests
    # must be gone before a test sets its own.
    gc.collect()
    yield
