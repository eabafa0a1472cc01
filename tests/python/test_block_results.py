"""A block's results besides its output: a router's logits that a
load-balancing loss reads, or its input passed through. Their gradients
reach the block's backward with its output's, as on the plain model, bit
for bit, whether memtrain keeps the block or recomputes it."""

import gc

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import memtrain
from exact import digest

WIDTH = 64
VOCAB = 32000


class RoutedBlock(nn.Module):
    """Two experts mixed by a router, with dropout: returns the output and
    the router's logits."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.router = nn.Linear(WIDTH, 2)
        self.experts = nn.ModuleList([nn.Linear(WIDTH, WIDTH) for _ in range(2)])
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.norm(x)
        logits = self.router(h)
        weights = logits.softmax(-1)
        mixed = sum(weights[..., k:k + 1] * self.drop(F.gelu(e(h))) for k, e in enumerate(self.experts))
        return x + mixed, logits


class RoutedModel(nn.Module):
    def __init__(self, layers=4):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList([RoutedBlock() for _ in range(layers)])
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        balance = 0
        for block in self.blocks:
            x, logits = block(x)
            balance = balance + logits.softmax(-1).mean((0, 1)).square().sum()
        return self.head(x), balance


def batches():
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, VOCAB, (2, n), generator=g) for n in (33, 49, 41, 57, 49)]


def train(model):
    torch.manual_seed(3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = []
    for ids in batches():
        logits, balance = model(ids)
        (F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten()) + 0.1 * balance).backward()
        seen.append([digest(p.grad) for p in model.parameters()])
        opt.step()
        opt.zero_grad(set_to_none=True)
    return seen


@pytest.mark.parametrize("collect_steps", [0, 10], ids=["kept", "recomputed"])
def test_a_routers_logits_for_a_load_balancing_loss_train_as_on_the_plain_model(collect_steps):
    plain = train(RoutedModel())
    gc.collect()
    m = memtrain.Module(RoutedModel(), budget="100%", sample=batches()[3], collect_steps=collect_steps)
    assert train(m) == plain
    assert (m.last_step["plan"] == "collect") == (collect_steps > 0)


class PassesItsInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return torch.relu(self.fc(x)), x


def test_an_input_passed_through_is_the_callers_own():
    """A block returning its input beside its output: the caller gets the
    tensor it passed, and a loss on it reaches the layers before."""
    def grads(model):
        torch.manual_seed(1)
        x = torch.randn(4, WIDTH)
        out, passed = model(x)
        (out.sum() + passed.square().sum()).backward()
        return [digest(p.grad) for p in model.parameters()]

    def chain():
        torch.manual_seed(0)
        return [nn.Linear(WIDTH, WIDTH), PassesItsInput()]

    plain = nn.Sequential(*chain())
    m = memtrain.Module(chain(), budget="1GiB")
    assert grads(m) == grads(plain)
