#!/usr/bin/env python3
"""The PyTorch reference of bench/bench_gpu.sh: the model of models/gpt2_small.json
built layer for layer (token + learned position embedding, pre-norm blocks of
causal multi-head attention with a qkv and an output projection, both with bias, and
an MLP of 4 x width with tanh-form gelu, a final layer norm, untied logits with
bias, cross-entropy), trained with AdamW and global-norm clipping on random tokens,
fp32 eager (no torch.compile, no autocast). Prints one line of key=value results
that bench_gpu.sh reads: tokens_per_s (median over the timed steps),
max_allocated_mib and max_reserved_mib (torch.cuda's peaks), params, and the loss.

--attention math (default) materializes the T x T scores and probabilities as
pipenet does; --attention sdpa uses F.scaled_dot_product_attention (in fp32 the
memory-efficient kernel). --tf32 lets cuBLAS and cuDNN use TF32 tensor cores for
fp32 matrix products; without it they compute in full fp32, as pipenet does.
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads, attention):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.mlp1 = nn.Linear(width, 4 * width)
        self.mlp2 = nn.Linear(4 * width, width)

    def attend(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = scores.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attend(self.ln1(x))
        return x + self.mlp2(F.gelu(self.mlp1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, seq, width, layers, heads, attention):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(Block(width, heads, attention) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.logits = nn.Linear(width, vocab)

    def forward(self, x, y):
        pos = torch.arange(x.shape[1], device=x.device)
        h = self.tokens(x) + self.positions(pos)
        for block in self.blocks:
            h = block(h)
        logits = self.logits(self.ln_f(h))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--steps", type=int, default=12, help="steps in all, warm-up included")
    p.add_argument("--warmup", type=int, default=2, help="first steps left out of the timing")
    p.add_argument("--attention", choices=["math", "sdpa"], default="math")
    p.add_argument("--tf32", action="store_true")
    a = p.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.manual_seed(1)
    dev = torch.device("cuda")
    model = GPT(a.vocab, a.seq, a.width, a.layers, a.heads, a.attention).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    x = torch.randint(0, 256, (a.batch, a.seq), device=dev)  # bytes, as pipenet's data
    y = torch.randint(0, 256, (a.batch, a.seq), device=dev)
    times, loss = [], float("nan")
    for step in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = model(x, y)
        out.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss = out.item()  # synchronizes, as pipenet reads its loss every step
        torch.cuda.synchronize()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    params = sum(t.numel() for t in model.parameters())
    step_s = statistics.median(times)
    print(f"tokens_per_s={a.batch * a.seq / step_s:.1f} step_s={step_s:.4f} "
          f"max_allocated_mib={torch.cuda.max_memory_allocated() / 2**20:.0f} "
          f"max_reserved_mib={torch.cuda.max_memory_reserved() / 2**20:.0f} "
          f"params={params} loss={loss:.4f} attention={a.attention} tf32={int(a.tf32)} "
          f"torch={torch.__version__} device={torch.cuda.get_device_name()}")


if __name__ == "__main__":
    main()
