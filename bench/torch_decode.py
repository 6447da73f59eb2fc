#!/usr/bin/env python3
"""The PyTorch peer of `loom bench decode`: the same Llama-style decode step
(RMS norm, grouped-query attention with RoPE on pairs (i, i + head_dim/2) over
a KV cache of context max_seq, SwiGLU, greedy argmax chained into the next
step's embedding) with random f16 weights, timed on one CUDA GPU as

  eager        the step as plain PyTorch calls,
  cuda graph   the same step captured once and replayed,
  compile      torch.compile(mode="max-autotune-no-cudagraphs"), then captured
               in a CUDA graph and replayed.

Like loom's benchmark, every variant first runs steps back to back for 1.5 s
(the GPU clock ramps up only under sustained load), then times at least 200
steps back to back: GPU time from CUDA events around the timed run, wall time
from the host clock. Positions cycle through the context, starting at 0, and
the token of each step is the previous step's argmax, kept on the GPU. The
weight-read floor is the weight bytes one step reads (every matrix and norm,
one embedding row) over the device-to-device copy bandwidth measured in the
same run (bytes read + written). The last line with --json is one JSON
object. Needs a CUDA GPU; nothing is downloaded.
"""
import argparse
import json
import math
import sys
import time

import torch

CONFIGS = {
    # name: dim, layers, heads, kv_heads, head_dim, ffn, vocab, max_seq
    "tiny": (256, 4, 8, 4, 32, 688, 512, 64),
    "1b": (2048, 16, 32, 8, 64, 8192, 32000, 512),
    "7b": (4096, 32, 32, 8, 128, 14336, 32000, 512),
}
EPS = 1e-5
THETA = 10000.0


class Model:
    """Weights, KV caches and the per-step state (token, position) on the GPU."""

    def __init__(self, cfg, dev, seed):
        dim, layers, heads, kv_heads, hd, ffn, vocab, max_seq = cfg
        self.dim, self.n_layers, self.heads, self.kv_heads, self.hd = dim, layers, heads, kv_heads, hd
        self.ffn, self.vocab, self.max_seq = ffn, vocab, max_seq
        g = torch.Generator(device=dev).manual_seed(seed)

        def mat(rows, cols):
            # Scale 1/sqrt(fan-in) keeps activations O(1) at every depth.
            return ((torch.rand(rows, cols, device=dev, generator=g) * 2 - 1) / math.sqrt(cols)).half()

        def norm():
            return (1 + 0.25 * (torch.rand(dim, device=dev, generator=g) * 2 - 1)).half()

        qd, kvd = heads * hd, kv_heads * hd
        self.embed = (torch.rand(vocab, dim, device=dev, generator=g) * 2 - 1).half()
        self.layers = []
        for _ in range(layers):
            self.layers.append(dict(attn_norm=norm(), wq=mat(qd, dim), wk=mat(kvd, dim), wv=mat(kvd, dim),
                                    wo=mat(dim, qd), ffn_norm=norm(), wg=mat(ffn, dim), wu=mat(ffn, dim),
                                    wd=mat(dim, ffn)))
        self.final_norm = norm()
        self.out = mat(vocab, dim)
        self.kcache = [torch.zeros(max_seq, kv_heads, hd, device=dev, dtype=torch.half) for _ in range(layers)]
        self.vcache = [torch.zeros(max_seq, kv_heads, hd, device=dev, dtype=torch.half) for _ in range(layers)]
        # RoPE angles pos * theta^(-2i/hd) for pairs (i, i + hd/2), all positions.
        inv = THETA ** (-2.0 * torch.arange(hd // 2, device=dev, dtype=torch.float64) / hd)
        ang = torch.arange(max_seq, device=dev, dtype=torch.float64)[:, None] * inv[None, :]
        self.cos = ang.cos().half()
        self.sin = ang.sin().half()
        self.positions = torch.arange(max_seq, device=dev)
        self.token = torch.ones(1, device=dev, dtype=torch.long)
        self.pos = torch.zeros(1, device=dev, dtype=torch.long)

    def weight_bytes(self):
        """Bytes one step reads from the weights: every matrix and norm, one row of the embedding table."""
        n = self.embed[0].numel() * 2 + self.final_norm.numel() * 2 + self.out.numel() * 2
        for layer in self.layers:
            n += sum(t.numel() * 2 for t in layer.values())
        return n


def rms_norm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).half() * w


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def step(m):
    """One decode step from m.token at m.pos; leaves the argmax in m.token and
    advances m.pos (mod max_seq), all on the GPU, so it can be captured."""
    pos = m.pos
    x = m.embed.index_select(0, m.token)  # 1 x dim
    cos = m.cos.index_select(0, pos)[:, None, :]  # 1 x 1 x hd/2
    sin = m.sin.index_select(0, pos)[:, None, :]
    # Cache rows after pos are masked: one static shape for every position.
    mask = torch.where(m.positions <= pos, 0.0, float("-inf")).to(torch.float32)  # max_seq
    group = m.heads // m.kv_heads
    scale = 1.0 / math.sqrt(m.hd)
    for l, w in enumerate(m.layers):
        h = rms_norm(x, w["attn_norm"])
        q = (h @ w["wq"].t()).view(1, m.heads, m.hd)
        k = (h @ w["wk"].t()).view(1, m.kv_heads, m.hd)
        v = (h @ w["wv"].t()).view(1, m.kv_heads, m.hd)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        m.kcache[l].index_copy_(0, pos, k)
        m.vcache[l].index_copy_(0, pos, v)
        kc = m.kcache[l].float().repeat_interleave(group, dim=1)  # max_seq x heads x hd
        vc = m.vcache[l].float().repeat_interleave(group, dim=1)
        s = torch.einsum("hd,thd->ht", q[0].float(), kc) * scale + mask[None, :]
        a = torch.einsum("ht,thd->hd", torch.softmax(s, dim=-1), vc).half().reshape(1, -1)
        x = x + a @ w["wo"].t()
        h = rms_norm(x, w["ffn_norm"])
        act = torch.nn.functional.silu(h @ w["wg"].t()) * (h @ w["wu"].t())
        x = x + act @ w["wd"].t()
    logits = rms_norm(x, m.final_norm) @ m.out.t()
    m.token.copy_(logits.float().argmax(-1))
    m.pos.copy_((pos + 1) % m.max_seq)


def copy_gbps(dev, nbytes=1 << 30, seconds=0.5):
    src = torch.empty(nbytes // 2, device=dev, dtype=torch.half).uniform_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:  # warm the clock on the copy itself
        dst.copy_(src)
        torch.cuda.synchronize()
    reps = 20
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        dst.copy_(src)
    b.record()
    b.synchronize()
    return 2.0 * nbytes * reps / (a.elapsed_time(b) * 1e-3) / 1e9


def capture(fn, m):
    """fn(m) captured in a CUDA graph after warm-up calls on a side stream (as
    PyTorch requires); returns the replay callable. The warm-up steps advance
    the state, which the caller resets."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(m)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(m)
    return graph.replay


def time_variant(run, m, steps, warmup_s):
    m.token.fill_(1)
    m.pos.zero_()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    warm = 0
    while time.perf_counter() - t0 < warmup_s:
        for _ in range(16):
            run()
        warm += 16
        torch.cuda.synchronize()
    m.pos.zero_()  # the timed run starts at position 0, like loom's
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    w0 = time.perf_counter()
    a.record()
    for _ in range(steps):
        run()
    b.record()
    b.synchronize()
    wall = time.perf_counter() - w0
    return a.elapsed_time(b) * 1e3 / steps, wall * 1e6 / steps, warm


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="1b")
    ap.add_argument("--steps", type=int, default=512, help="timed steps per variant (at least 200)")
    ap.add_argument("--warmup", type=float, default=1.5, help="seconds of back-to-back steps before timing")
    ap.add_argument("--variants", default="eager,graph,compile", help="comma-separated subset")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", action="store_true", help="one JSON object on the last line")
    args = ap.parse_args()
    if args.steps < 200:
        ap.error("--steps must be at least 200")
    if not torch.cuda.is_available():
        sys.exit("torch_decode: no CUDA device")
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    name = torch.cuda.get_device_name(dev)
    m = Model(CONFIGS[args.config], dev, args.seed)
    wbytes = m.weight_bytes()
    rows = []
    with torch.inference_mode():
        for v in args.variants.split(","):
            if v == "eager":
                run = lambda: step(m)  # noqa: E731
                label = "eager"
            elif v == "graph":
                run = capture(step, m)
                label = "cuda graph"
            elif v == "compile":
                compiled = torch.compile(step, mode="max-autotune-no-cudagraphs")
                run = capture(compiled, m)
                label = "compile + cuda graph"
            else:
                sys.exit(f"torch_decode: unknown variant {v!r}")
            gpu_us, wall_us, warm = time_variant(run, m, args.steps, args.warmup)
            rows.append(dict(variant=label, gpu_us_per_token=gpu_us, wall_us_per_token=wall_us, warmup_steps=warm,
                             tokens=m.token.item()))
        gbps = copy_gbps(dev)
    floor_us = wbytes / (gbps * 1e3)
    dim, layers, heads, kv_heads, hd, ffn, vocab, max_seq = CONFIGS[args.config]
    print(f"torch_decode on {name}: config {args.config} (dim {dim}, {layers} layers, {heads}/{kv_heads} heads x "
          f"{hd}, ffn {ffn}, vocab {vocab}, context {max_seq}, f16); {args.steps} timed steps per variant after "
          f"{args.warmup:.1f} s warm-up; torch {torch.__version__}")
    print(f"weights read per token {wbytes / 1e6:.1f} MB; copy {gbps:.0f} GB/s (read + write, same run): "
          f"weight-read floor {floor_us:.1f} us")
    print(f"{'variant':<24} {'GPU us/tok':>10} {'wall us/tok':>11} {'floor':>7}")
    for r in rows:
        r["floor_share"] = floor_us / r["gpu_us_per_token"]
        print(f"{r['variant']:<24} {r['gpu_us_per_token']:10.1f} {r['wall_us_per_token']:11.1f} "
              f"{100 * r['floor_share']:6.0f}%")
    if args.json:
        print(json.dumps(dict(config=args.config, device=name, torch=torch.__version__, steps=args.steps,
                              weight_bytes=wbytes, copy_gbps=gbps, floor_us=floor_us, variants=rows)))


if __name__ == "__main__":
    main()
