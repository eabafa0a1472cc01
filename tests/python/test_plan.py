"""Planning without running, the CLI's chain format, and the advisor."""

import json
import os
import re
import subprocess

import pytest

import memtrain

SOURCE = os.environ.get("MEMTRAIN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CHAIN = os.path.join(SOURCE, "docs", "examples", "tagger-epyc-cpu-batch32.json")
CLI = os.environ.get("MEMTRAIN_CLI")


def test_chain_json_round_trip():
    with open(CHAIN) as f:
        text = f.read()
    chain = memtrain.Chain.from_json(text)
    assert len(chain) == len(json.loads(text)["stages"])
    again = memtrain.Chain.from_json(chain.to_json())
    assert json.loads(again.to_json()) == json.loads(chain.to_json())
    assert memtrain.Chain.from_file(CHAIN).to_json() == chain.to_json()


def test_chain_errors_name_the_field():
    with pytest.raises(memtrain.Error, match="not JSON"):
        memtrain.Chain.from_json("{")
    with pytest.raises(memtrain.Error, match="stages"):
        memtrain.Chain.from_json("{}")


def test_plan_lowers_the_peak_with_the_budget():
    chain = memtrain.Chain.from_file(CHAIN)
    full = memtrain.plan(chain, "100%", "optimal")
    half = memtrain.plan(chain, "50%", "optimal")
    assert full["feasible"] and half["feasible"]
    assert half["peak_bytes"] <= half["budget_bytes"] < full["peak_bytes"]
    assert half["recomputed_forwards"] > full["recomputed_forwards"] == 0
    assert half["time_seconds"] > full["time_seconds"]


def test_infeasible_min_bytes_is_the_figure_the_cli_prints():
    chain = memtrain.Chain.from_file(CHAIN)
    with pytest.raises(memtrain.Infeasible) as caught:
        memtrain.plan(chain, "5%", "optimal")
    if not CLI:
        pytest.skip("MEMTRAIN_CLI not set")
    out = subprocess.run([CLI, "plan", "--chain", CHAIN, "--budget", "5%", "--planner", "optimal"],
                         capture_output=True, text=True)
    numbers = [int(n) for n in re.findall(r"(\d+) bytes", out.stdout + out.stderr)]
    assert caught.value.min_bytes in numbers, out.stdout + out.stderr


def test_advise_picks_a_method():
    rows = []
    for batch in (8, 16, 32, 64):
        rows.append(("plain", batch, 100_000_000 + 20_000_000 * batch, 0.01 + 0.004 * batch))
        rows.append(("checkpoint", batch, 100_000_000 + 6_000_000 * batch, 0.012 + 0.005 * batch))
    advice = memtrain.advise(rows, "1GiB")
    by_method = {m["method"]: m for m in advice["methods"]}
    assert by_method["checkpoint"]["max_batch"] > by_method["plain"]["max_batch"] > 0
    assert advice["recommended"] in by_method
    with pytest.raises(memtrain.UsageError):
        memtrain.advise(rows, "50%")
