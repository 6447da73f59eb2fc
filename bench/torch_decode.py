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
same run (bytes read + written).

With --prefill N, the peer of `llama-decode --bench-prefill N` and of
llama.cpp's ppN instead: one forward over N prompt ids at positions
0..N-1 (the layers' K and V rows written into the KV cache, whose context
is then at least N), attention by F.scaled_dot_product_attention with
is_causal=True (PyTorch picks its kernel: flash attention on an H100), and
the argmax of the last row, or of every row with --verify (each row through
the LM head, as loom's verification step), timed as

  eager        the forward as plain PyTorch calls,
  compile      torch.compile(mode="max-autotune-no-cudagraphs") of the same
               forward, captured in a CUDA graph and replayed
               (--variants graph adds the eager forward captured alone).

Each variant first runs forwards back to back for 1.5 s, then times at
least 20 forwards back to back, each between its own pair of CUDA events:
ms per forward is the median of those GPU times (loom's figure is a median
too), tokens/s is N over it, wall ms the host clock over the whole run
divided by the forwards. TFLOP/s is dense f16 work over the median time:
the matrix products, 2 x (the layers' matrix parameters x N + the LM head's
x the rows it takes), and, stated apart, the attention's two products over
the causal triangle, 2 x 2 x heads x head_dim x N(N+1)/2; both over the
whole forward's time, so they are what the forward reaches, not the peak of
one kernel. With --verify, the rows whose argmax differs from the first
variant's are counted.

The last line with --json is one JSON object. Needs a CUDA GPU; nothing is
downloaded.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

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
        # Prefill: the prompt ids and every row's argmax (only the last row's
        # without --verify), static buffers so that the forward can be captured.
        self.ids = torch.zeros(0, device=dev, dtype=torch.long)
        self.row_tokens = torch.zeros(0, device=dev, dtype=torch.long)

    def weight_bytes(self):
        """Bytes one step reads from the weights: every matrix and norm, one row of the embedding table."""
        n = self.embed[0].numel() * 2 + self.final_norm.numel() * 2 + self.out.numel() * 2
        for layer in self.layers:
            n += sum(t.numel() * 2 for t in layer.values())
        return n

    def matmul_params(self):
        """(the layers' matrix parameters, the LM head's): the weights a row meets in matrix products."""
        layer = sum(w.numel() for k, w in self.layers[0].items() if k.startswith("w"))
        return layer * self.n_layers, self.out.numel()


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


def prefill(m, verify):
    """One forward over the n ids in m.ids at positions 0..n-1: fills the
    first n rows of the KV caches and leaves the argmax of the last row (of
    every row with verify) in m.row_tokens. Static shapes: capturable."""
    n = m.ids.shape[0]
    x = m.embed.index_select(0, m.ids)  # n x dim
    cos = m.cos[:n, None, :]  # n x 1 x hd/2
    sin = m.sin[:n, None, :]
    group = m.heads // m.kv_heads
    for l, w in enumerate(m.layers):
        h = rms_norm(x, w["attn_norm"])
        q = (h @ w["wq"].t()).view(n, m.heads, m.hd)
        k = (h @ w["wk"].t()).view(n, m.kv_heads, m.hd)
        v = (h @ w["wv"].t()).view(n, m.kv_heads, m.hd)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        m.kcache[l][:n].copy_(k)
        m.vcache[l][:n].copy_(v)
        # Query head j reads KV head j // group, as in step(); heads x n x hd
        # with a batch of one, the layout the flash kernel takes.
        qh = q.transpose(0, 1)[None]
        kh = k.repeat_interleave(group, dim=1).transpose(0, 1)[None]
        vh = v.repeat_interleave(group, dim=1).transpose(0, 1)[None]
        a = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)  # 1 x heads x n x hd, scale 1/sqrt(hd)
        x = x + a[0].transpose(0, 1).reshape(n, -1) @ w["wo"].t()
        h = rms_norm(x, w["ffn_norm"])
        act = F.silu(h @ w["wg"].t()) * (h @ w["wu"].t())
        x = x + act @ w["wd"].t()
    rows = x if verify else x[-1:]
    logits = rms_norm(rows, m.final_norm) @ m.out.t()
    m.row_tokens.copy_(logits.float().argmax(-1))


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


def time_prefill(run, forwards, warmup_s):
    """(median GPU ms per forward, wall ms per forward, warm-up forwards):
    forwards back to back for warmup_s, then forwards timed back to back,
    each between its own pair of events."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    warm = 0
    while time.perf_counter() - t0 < warmup_s:
        for _ in range(4):
            run()
        warm += 4
        torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(forwards)]
    w0 = time.perf_counter()
    for a, b in ev:
        a.record()
        run()
        b.record()
    ev[-1][1].synchronize()
    wall = time.perf_counter() - w0
    gpu = sorted(a.elapsed_time(b) for a, b in ev)
    mid = len(gpu) // 2
    median = gpu[mid] if len(gpu) % 2 else 0.5 * (gpu[mid - 1] + gpu[mid])
    return median, wall * 1e3 / forwards, warm


def prefill_flops(m, n, verify):
    """(matrix products, attention) FLOPs of one forward over n rows."""
    layers, head = m.matmul_params()
    mm = 2 * (layers * n + head * (n if verify else 1))
    attn = 2 * 2 * m.heads * m.hd * n * (n + 1) // 2
    return mm, attn


def main_prefill(args, m, dev, name):
    n = args.prefill
    m.ids = torch.randint(0, m.vocab, (n,), device=dev, generator=torch.Generator(device=dev).manual_seed(args.seed))
    m.row_tokens = torch.zeros(n if args.verify else 1, device=dev, dtype=torch.long)
    mm, attn = prefill_flops(m, n, args.verify)
    rows = []
    with torch.inference_mode():
        for v in args.variants.split(","):
            if v == "eager":
                run = lambda: prefill(m, args.verify)  # noqa: E731
                label = "eager"
            elif v == "graph":
                run = capture(lambda model: prefill(model, args.verify), m)
                label = "cuda graph"
            elif v == "compile":
                compiled = torch.compile(prefill, mode="max-autotune-no-cudagraphs")
                run = capture(lambda model: compiled(model, args.verify), m)
                label = "compile + cuda graph"
            else:
                sys.exit(f"torch_decode: unknown variant {v!r} with --prefill (eager, graph, compile)")
            ms, wall_ms, warm = time_prefill(run, args.forwards, args.warmup)
            tokens = m.row_tokens.tolist()
            rows.append(dict(variant=label, gpu_ms_per_forward=ms, wall_ms_per_forward=wall_ms,
                             tokens_per_s=n / (ms * 1e-3), matmul_tflops=mm / (ms * 1e-3) / 1e12,
                             attention_tflops=attn / (ms * 1e-3) / 1e12, warmup_forwards=warm,
                             last_row_token=tokens[-1], row_tokens=tokens if args.verify else None))
    if args.verify:
        for r in rows:
            r["rows_differing"] = sum(a != b for a, b in zip(r["row_tokens"], rows[0]["row_tokens"]))
    dim, layers, heads, kv_heads, hd, ffn, vocab, _ = CONFIGS[args.config]
    print(f"torch_decode --prefill {n} on {name}: config {args.config} (dim {dim}, {layers} layers, {heads}/{kv_heads} "
          f"heads x {hd}, ffn {ffn}, vocab {vocab}, context {m.max_seq}, f16); "
          f"{'every row' if args.verify else 'the last row'} through the LM head; median of {args.forwards} "
          f"forwards per variant after {args.warmup:.1f} s warm-up; torch {torch.__version__}")
    print(f"per forward: {mm / 1e9:.1f} GFLOP in matrix products, {attn / 1e9:.1f} GFLOP in attention (causal)")
    print(f"{'variant':<24} {'ms GPU':>8} {'ms wall':>8} {'tokens/s':>9} {'matmul TF/s':>11} {'attn TF/s':>9} "
          f"{'last row':>8}" + (f" {'rows differing':>14}" if args.verify else ""))
    for r in rows:
        print(f"{r['variant']:<24} {r['gpu_ms_per_forward']:8.3f} {r['wall_ms_per_forward']:8.3f} "
              f"{r['tokens_per_s']:9.0f} {r['matmul_tflops']:11.1f} {r['attention_tflops']:9.1f} "
              f"{r['last_row_token']:8d}" + (f" {r['rows_differing']:14d}" if args.verify else ""))
    if args.json:
        for r in rows:
            r.pop("row_tokens")
        print(json.dumps(dict(mode="prefill", config=args.config, device=name, torch=torch.__version__, rows=n,
                              verify=args.verify, forwards=args.forwards, matmul_flops=mm, attention_flops=attn,
                              variants=rows)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="1b")
    ap.add_argument("--steps", type=int, default=512, help="timed steps per variant (at least 200)")
    ap.add_argument("--warmup", type=float, default=1.5, help="seconds of back-to-back steps before timing")
    ap.add_argument("--variants", default=None,
                    help="comma-separated (decode: eager,graph,compile; --prefill: eager,compile, or graph too)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", action="store_true", help="one JSON object on the last line")
    ap.add_argument("--prefill", type=int, default=0, metavar="N",
                    help="time one forward over N prompt ids instead of decode steps")
    ap.add_argument("--verify", action="store_true", help="with --prefill: every row through the LM head")
    ap.add_argument("--forwards", type=int, default=30, help="with --prefill: timed forwards (at least 20)")
    args = ap.parse_args()
    if args.steps < 200:
        ap.error("--steps must be at least 200")
    if args.prefill < 0 or (args.verify and not args.prefill):
        ap.error("--verify needs --prefill N, N > 0")
    if args.forwards < 20:
        ap.error("--forwards must be at least 20")
    if args.variants is None:
        args.variants = "eager,compile" if args.prefill else "eager,graph,compile"
    if not torch.cuda.is_available():
        sys.exit("torch_decode: no CUDA device")
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    name = torch.cuda.get_device_name(dev)
    cfg = CONFIGS[args.config]
    if args.prefill:
        # The caches hold the N rows the forward writes, whatever the preset's context.
        m = Model(cfg[:7] + (max(cfg[7], args.prefill),), dev, args.seed)
        return main_prefill(args, m, dev, name)
    m = Model(cfg, dev, args.seed)
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
