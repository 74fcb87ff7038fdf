#!/usr/bin/env python3
"""Plain-PyTorch reference of ml-alpha's perception model (DESIGN section 1), written independently of
the C++ code, with the same tensor names so an ml-alpha checkpoint loads with load_state_dict(strict=True).

  check: load a checkpoint, run the first window (length train.L) of every instrument of a .npy panel
         and compare with `ml-alpha predict --split all` output (pred.npy) and its masked MSE — an
         independent check of the math.
  bench: time the usual PyTorch training step (fused AdamW, clip_grad_norm_, loss.item() every step)
         in eager mode and with the whole step captured in a CUDA graph, on the DESIGN section 5 shapes.
         --precision fp32 | tf32 | bf16 runs every shape in it (--tf32: the older spelling of --precision
         tf32); without it S and M run fp32 and L tf32. bf16 is PyTorch's usual mixed precision:
         torch.autocast(bfloat16) around the forward pass and the loss, fp32 parameters (the master
         weights), gradients and fused AdamW, no GradScaler (bf16 has fp32's exponent range).
  stream: time one bar of the S and M models stepped the way mamba_ssm's Mamba2.step does (conv state
         rolled, softplus, state update and output by einsum, gated norm), fp32, for 1, 100 and 5000
         instruments: on the GPU eagerly and with the bar captured in a CUDA graph, and on the CPU with one
         thread and with every thread; the rows of ml-alpha-stream-bench (docs/benchmarks.md, "Streaming").
         It first checks that stepping reproduces the full-sequence forward.
  cpu:   the same training step on the CPU in fp32 (fused AdamW, clip_grad_norm_, loss.item() every step,
         windows gathered from an in-memory panel each step), torch.set_num_threads(n) for each n of
         --threads, on the default and S shapes: the PyTorch side of `ml-alpha bench --device cpu` (scripts/cpu_bench.sh).
"""
import argparse
import contextlib
import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def segsum(a):
    """a (..., Q) -> (..., Q, Q) with out[i, j] = a[j+1] + ... + a[i] for j <= i, -inf above the diagonal."""
    q = a.size(-1)
    c = torch.cumsum(a, dim=-1)
    out = c[..., :, None] - c[..., None, :]
    mask = torch.tril(torch.ones(q, q, dtype=torch.bool, device=a.device))
    return out.masked_fill(~mask, float("-inf"))


def ssd_chunked(x, dt, A, Bm, Cm, Q):
    """x (b,l,h,p), dt (b,l,h), A (h), Bm/Cm (b,l,h,n) -> y (b,l,h,p): the chunked SSD form."""
    b, l, h, p = x.shape
    pad = (-l) % Q
    if pad:  # dt = 0 on padding: decay 1 and no input, so the real positions are unchanged
        x, dt, Bm, Cm = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in (x, dt, Bm, Cm))
    c = (l + pad) // Q
    X = (x * dt[..., None]).reshape(b, c, Q, h, p)
    Bc, Cc = Bm.reshape(b, c, Q, h, -1), Cm.reshape(b, c, Q, h, -1)
    a = (dt * A).reshape(b, c, Q, h).permute(0, 3, 1, 2)          # (b, h, c, Q)
    acum = torch.cumsum(a, dim=-1)
    decay = torch.exp(segsum(a))                                   # (b, h, c, Q, Q)
    y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", Cc, Bc, decay, X)
    to_end = torch.exp(acum[..., -1:] - acum)                      # (b, h, c, Q)
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", Bc, to_end, X)
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    chunk_decay = torch.exp(segsum(F.pad(acum[..., -1], (1, 0))))  # (b, h, c+1, c+1)
    states = torch.einsum("bhzc,bchpn->bzhpn", chunk_decay, states)[:, :-1]
    y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", Cc, states, torch.exp(acum))
    return (y_diag + y_off).reshape(b, c * Q, h, p)[:, :l]


class Mixer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, self.P, self.G, self.N, self.W, self.Q = cfg["D"], cfg["P"], cfg["G"], cfg["N"], cfg["W"], cfg["Q"]
        self.di = cfg["expand"] * D
        self.H = self.di // self.P
        self.conv_dim = self.di + 2 * self.G * self.N
        self.lo, self.hi = float(cfg.get("dt_limit_lo", 0.0)), cfg.get("dt_limit_hi", "inf")
        self.hi = float("inf") if self.hi == "inf" else float(self.hi)
        self.in_proj = nn.Linear(D, 2 * self.di + 2 * self.G * self.N + self.H, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, self.W, groups=self.conv_dim, padding=self.W - 1)
        self.dt_bias = nn.Parameter(torch.zeros(self.H))
        self.A_log = nn.Parameter(torch.zeros(self.H))
        self.D = nn.Parameter(torch.ones(self.H))
        self.norm = RMSNorm(self.di)
        self.out_proj = nn.Linear(self.di, D, bias=False)

    def forward(self, u):
        b, l, _ = u.shape
        z, xbc, dt = torch.split(self.in_proj(u), [self.di, self.conv_dim, self.H], dim=-1)
        xbc = F.silu(self.conv1d(xbc.transpose(1, 2))[..., :l].transpose(1, 2))
        x, Bm, Cm = torch.split(xbc, [self.di, self.G * self.N, self.G * self.N], dim=-1)
        delta = F.softplus(dt + self.dt_bias).clamp(self.lo, self.hi)
        A = -torch.exp(self.A_log)
        rep = self.H // self.G
        Bh = Bm.reshape(b, l, self.G, self.N).repeat_interleave(rep, dim=2)
        Ch = Cm.reshape(b, l, self.G, self.N).repeat_interleave(rep, dim=2)
        xh = x.reshape(b, l, self.H, self.P)
        y = ssd_chunked(xh, delta, A, Bh, Ch, self.Q) + self.D[:, None] * xh
        g = (y.reshape(b, l, self.di) * F.silu(z)).reshape(b, l, self.G, self.di // self.G)
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.out_proj(g.reshape(b, l, self.di) * self.norm.weight)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm = RMSNorm(cfg["D"])
        self.mixer = Mixer(cfg)

    def forward(self, h):
        return h + self.mixer(self.norm(h))


class Perception(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_proj = nn.Linear(cfg["F"], cfg["D"])
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg["NL"]))
        self.norm_f = RMSNorm(cfg["D"])
        self.head = nn.Linear(cfg["D"], cfg["K"])

    def forward(self, x):
        h = self.input_proj(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm_f(h))


def masked_mse(out, y):
    m = ~torch.isnan(y)
    e = torch.where(m, out - torch.nan_to_num(y), torch.zeros_like(out))
    return (e * e).sum() / m.sum().clamp(min=1)


def cmd_check(a):
    from safetensors import safe_open
    from safetensors.torch import load_file
    with safe_open(a.checkpoint, "pt") as f:
        meta = f.metadata()
    cfg, tcfg, stats = (json.loads(meta[k]) for k in ("model_config", "train_config", "feature_stats"))
    model = Perception(cfg).double()
    model.load_state_dict({k: v.double() for k, v in load_file(a.checkpoint).items()}, strict=True)
    L = tcfg["L"]
    x = torch.from_numpy(np.load(a.features).astype(np.float64))
    if x.dim() == 2:
        x = x[None]
    x = (x - torch.tensor(stats["mean"], dtype=torch.float64)) / torch.tensor(stats["stdev"], dtype=torch.float64)
    x = torch.nan_to_num(x[:, :L], nan=0.0)
    with torch.no_grad():
        ref = model(x)
    pred = torch.from_numpy(np.load(a.pred).astype(np.float64))[:, :L]
    rel = ((pred - ref).norm() / ref.norm()).item()
    print(f"torch (float64) vs ml-alpha predictions, first window of {x.shape[0]} instruments x {L} steps: "
          f"relative L2 error {rel:.3e}")
    ok = rel <= a.tol
    if a.targets:
        y = torch.from_numpy(np.load(a.targets).astype(np.float64))
        y = y.reshape(y.shape[0] if y.dim() == 3 else 1, -1, ref.shape[-1])[:, :L]
        l_ref, l_ml = masked_mse(ref, y).item(), masked_mse(pred, y).item()
        print(f"masked MSE on that batch: torch {l_ref:.7g}  ml-alpha {l_ml:.7g}  rel diff {abs(l_ref - l_ml) / l_ref:.2e}")
        ok = ok and abs(l_ref - l_ml) <= a.tol * l_ref
    print("check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


SHAPES = {"default": (16, 64, 8, 32, 2, 16, 16, 64), "S": (64, 256, 32, 128, 4, 64, 32, 64), "M": (32, 512, 64, 256, 6, 64, 64, 128),
          "L": (8, 2048, 64, 1024, 8, 128, 64, 256)}


PRECISIONS = ("fp32", "tf32", "bf16")


def default_precision(name):
    """The precision a shape runs in without --precision: L in tf32, as ml-alpha bench's first L row."""
    return "tf32" if name == "L" else "fp32"


def chosen_precision(a, parser):
    """--precision, or --tf32 as its older spelling; None when neither was given."""
    if a.tf32 and a.precision not in (None, "tf32"):
        parser.error(f"--tf32 (the older spelling of --precision tf32) contradicts --precision {a.precision}: "
                     "give only --precision")
    return "tf32" if a.tf32 else a.precision


def bench_one(name, graph, steps, warmup, precision):
    B, L, Fe, D, NL, N, P, Q = SHAPES[name]
    # fp32 and bf16 leave tf32 off: in bf16 the matrix products autocast to bf16, and what autocast keeps
    # in fp32 stays true fp32.
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    dev = "cuda"
    torch.manual_seed(0)
    cfg = dict(F=Fe, K=1, D=D, NL=NL, expand=2, P=P, G=1, N=N, W=4, Q=Q)
    model = Perception(cfg).to(dev)
    with torch.no_grad():  # A ~ U(1, 16) and a realistic dt as mamba_ssm initialises them
        for layer in model.layers:
            layer.mixer.A_log.copy_(torch.log(torch.empty_like(layer.mixer.A_log).uniform_(1, 16)))
            dt = torch.exp(torch.empty_like(layer.mixer.dt_bias).uniform_(math.log(1e-3), math.log(1e-1)))
            layer.mixer.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=True, capturable=graph)
    Ninst, T = 16, L + 512
    panel_x = torch.randn(Ninst, T, Fe, device=dev)
    panel_y = torch.randn(Ninst, T, 1, device=dev)
    xb = torch.empty(B, L, Fe, device=dev)
    yb = torch.empty(B, L, 1, device=dev)
    ar = torch.arange(L, device=dev)

    def sample():  # device-side sampling, like ml-alpha's
        inst = torch.randint(0, Ninst, (B,), device=dev)
        start = torch.randint(0, T - L + 1, (B,), device=dev)
        xb.copy_(panel_x[inst[:, None], start[:, None] + ar])
        yb.copy_(panel_y[inst[:, None], start[:, None] + ar])

    def autocast():
        """bf16: the forward pass and the loss under autocast (linear, conv1d and einsum in bf16 with fp32
        accumulation; mse_loss, softplus, exp, cumsum and the norms' reductions in fp32). Inside a CUDA
        graph capture the cast-weight cache stays off: cached casts would be made once, at capture,
        and never again after the optimizer changes the weights."""
        if precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=not graph)

    def step():
        sample()
        opt.zero_grad(set_to_none=False)
        with autocast():
            loss = F.mse_loss(model(xb), yb)
        loss.backward()  # outside autocast, as PyTorch recommends; the gradients come out fp32 like the weights
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    t_first = time.perf_counter()
    step().item()  # no reference kept: a live autograd graph would break the capture below
    t_first = time.perf_counter() - t_first
    if graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_loss = step()
        run = lambda: (g.replay(), static_loss.item())  # noqa: E731
    else:
        run = lambda: step().item()  # noqa: E731
    for _ in range(warmup):
        run()
    times = []
    for _ in range(steps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        run()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    times.sort()
    med = times[len(times) // 2]
    print(f"| torch {name} {precision} {'graph' if graph else 'eager'} | {med:9.3f} ms | "
          f"{B * L / med * 1e3:12.0f} tok/s | first step {t_first:.2f} s |", flush=True)
    return med


def cmd_bench(a):
    """Each (configuration, mode) runs in its own process: a failed graph capture leaves CUDA state
    (the RNG's capture offsets) that would poison every later measurement in the same process."""
    import subprocess
    chosen = a.chosen_precision
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}; "
          f"{chosen or 'fp32 (L: tf32)'}; median of {a.steps} steps, loss.item() each step", flush=True)
    for name in a.configs.split(","):
        precision = chosen or default_precision(name)
        for graph in (False, True):
            cmd = [sys.executable, __file__, "bench-one", "--config", name, "--steps", str(a.steps),
                   "--warmup", str(a.warmup), "--precision", precision] + (["--graph"] if graph else [])
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                last = (r.stderr.strip().splitlines() or ["?"])[-1]
                print(f"| torch {name} {precision} {'graph' if graph else 'eager'} | failed: {last} |", flush=True)
            else:
                print(r.stdout.strip(), flush=True)
    return 0


def bench_cpu_one(name, threads, steps, warmup):
    """Median seconds of the whole CPU step at `threads` threads (the model and step of bench_one, fp32)."""
    torch.set_num_threads(threads)
    B, L, Fe, D, NL, N, P, Q = SHAPES[name]
    torch.manual_seed(0)
    cfg = dict(F=Fe, K=1, D=D, NL=NL, expand=2, P=P, G=1, N=N, W=4, Q=Q)
    model = Perception(cfg)
    with torch.no_grad():  # A ~ U(1, 16) and a realistic dt as mamba_ssm initialises them
        for layer in model.layers:
            layer.mixer.A_log.copy_(torch.log(torch.empty_like(layer.mixer.A_log).uniform_(1, 16)))
            dt = torch.exp(torch.empty_like(layer.mixer.dt_bias).uniform_(math.log(1e-3), math.log(1e-1)))
            layer.mixer.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
    Ninst, T = 16, L + 512
    panel_x, panel_y = torch.randn(Ninst, T, Fe), torch.randn(Ninst, T, 1)
    ar = torch.arange(L)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        inst = torch.randint(0, Ninst, (B,))
        start = torch.randint(0, T - L + 1, (B,))
        xb, yb = panel_x[inst[:, None], start[:, None] + ar], panel_y[inst[:, None], start[:, None] + ar]
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(xb), yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def cmd_cpu(a):
    print(f"PyTorch {torch.__version__} on the CPU ({torch.get_num_threads()} threads by default), fp32, fused AdamW; "
          f"median of {a.steps} steps after {a.warmup}", flush=True)
    for name in a.configs.split(","):
        for n in (int(t) for t in a.threads.split(",")):
            med = bench_cpu_one(name, n, a.steps if name != "S" else max(3, a.steps // 4), a.warmup)
            B, L = SHAPES[name][:2]
            print(f"| torch cpu      | {name:<7} | {n:3d} | {med * 1e3:10.3f} ms | {B * L / med:11.0f} tok/s |",
                  flush=True)
    return 0


def cmd_bench_one(a):
    bench_one(a.config, a.graph, a.steps, a.warmup, a.chosen_precision or default_precision(a.config))
    return 0


# ---- streaming: one bar at a time, as mamba_ssm's Mamba2.step ----

def mixer_step(m, u, conv_state, ssm_state):
    """One bar of Mixer m as Mamba2.step computes it: u (I, D); conv_state (I, conv_dim, W), the newest input
    last; ssm_state (I, H, P, N); both updated in place. Returns the mixer output (I, D)."""
    z, xbc, dt = torch.split(m.in_proj(u), [m.di, m.conv_dim, m.H], dim=-1)
    conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))
    conv_state[:, :, -1] = xbc
    xbc = F.silu(torch.sum(conv_state * m.conv1d.weight.squeeze(1), dim=-1) + m.conv1d.bias)
    x, Bm, Cm = torch.split(xbc, [m.di, m.G * m.N, m.G * m.N], dim=-1)
    A = -torch.exp(m.A_log)
    dt = F.softplus(dt + m.dt_bias).clamp(m.lo, m.hi)
    dA = torch.exp(dt * A)
    x = x.reshape(-1, m.H, m.P)
    if m.G == 1:  # mamba_ssm's own path (B, C shared by every head)
        dBx = torch.einsum("bh,bn,bhp->bhpn", dt, Bm, x)
        ssm_state.copy_(ssm_state * dA[:, :, None, None] + dBx)
        y = torch.einsum("bhpn,bn->bhp", ssm_state, Cm)
    else:
        Bh = Bm.reshape(-1, m.G, m.N).repeat_interleave(m.H // m.G, dim=1)
        Ch = Cm.reshape(-1, m.G, m.N).repeat_interleave(m.H // m.G, dim=1)
        dBx = torch.einsum("bh,bhn,bhp->bhpn", dt, Bh, x)
        ssm_state.copy_(ssm_state * dA[:, :, None, None] + dBx)
        y = torch.einsum("bhpn,bhn->bhp", ssm_state, Ch)
    y = y + m.D[:, None] * x
    g = (y.reshape(-1, m.di) * F.silu(z)).reshape(-1, m.G, m.di // m.G)
    g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + 1e-5)
    return m.out_proj(g.reshape(-1, m.di) * m.norm.weight)


def stream_states(model, n, device, dtype=torch.float32):
    return [(torch.zeros(n, l.mixer.conv_dim, l.mixer.W, device=device, dtype=dtype),
             torch.zeros(n, l.mixer.H, l.mixer.P, l.mixer.N, device=device, dtype=dtype)) for l in model.layers]


def model_step(model, x, states):
    """x (I, F) -> out (I, K), advancing states (stream_states) by one bar."""
    h = model.input_proj(x)
    for layer, (cs, ss) in zip(model.layers, states):
        h = h + mixer_step(layer.mixer, layer.norm(h), cs, ss)
    return model.head(model.norm_f(h))


def stream_model(name, device):
    _, _, Fe, D, NL, N, P, Q = SHAPES[name]
    torch.manual_seed(0)
    model = Perception(dict(F=Fe, K=1, D=D, NL=NL, expand=2, P=P, G=1, N=N, W=4, Q=Q)).to(device)
    with torch.no_grad():
        for layer in model.layers:
            layer.mixer.A_log.copy_(torch.log(torch.empty_like(layer.mixer.A_log).uniform_(1, 16)))
            dt = torch.exp(torch.empty_like(layer.mixer.dt_bias).uniform_(math.log(1e-3), math.log(1e-1)))
            layer.mixer.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
    return model.eval(), Fe


def stream_check():
    """Stepping equals the full-sequence forward (float64; G = 1 and G = 2 models): the largest difference."""
    worst = 0.0
    for G in (1, 2):
        cfg = dict(F=5, K=2, D=16, NL=2, expand=2, P=8, G=G, N=8, W=4, Q=4)
        torch.manual_seed(G)
        model = Perception(cfg).double().eval()
        x = torch.randn(3, 11, cfg["F"], dtype=torch.float64)
        with torch.no_grad():
            full = model(x)
            states = stream_states(model, 3, "cpu", torch.float64)
            stepped = torch.stack([model_step(model, x[:, t], states) for t in range(x.shape[1])], dim=1)
        worst = max(worst, (full - stepped).abs().max().item())
    return worst


def time_gpu(model, x, bars, graph):
    """(device µs per bar with bars enqueued back to back, host µs per step() with the row copied in from
    pinned memory and the predictions read back) for one configuration."""
    states = stream_states(model, x.shape[0], "cuda")
    host_x = x.cpu().pin_memory()
    dev_x = x.clone()
    if graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model_step(model, dev_x, states)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_out = model_step(model, dev_x, states)
        bar = g.replay
        result = lambda: static_out  # noqa: E731
    else:
        holder = {}

        def bar():
            holder["out"] = model_step(model, dev_x, states)
        result = lambda: holder["out"]  # noqa: E731
    for _ in range(20):
        bar()
    torch.cuda.synchronize()
    reps = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(bars):
            bar()
        e1.record()
        e1.synchronize()
        reps.append(e0.elapsed_time(e1) * 1e3 / bars)
    walls = []
    for _ in range(bars):
        t0 = time.perf_counter()
        dev_x.copy_(host_x, non_blocking=True)
        bar()
        result().cpu()
        walls.append((time.perf_counter() - t0) * 1e6)
    return sorted(reps)[len(reps) // 2], sorted(walls)[len(walls) // 2]


def time_cpu(model, x, seconds, threads):
    torch.set_num_threads(threads)
    states = stream_states(model, x.shape[0], "cpu")
    model_step(model, x, states)
    walls = []
    start = time.perf_counter()
    while not walls or (len(walls) < 50 and time.perf_counter() - start < seconds):
        t0 = time.perf_counter()
        model_step(model, x, states)
        walls.append((time.perf_counter() - t0) * 1e6)
    return sorted(walls)[len(walls) // 2]


def cmd_stream(a):
    import os
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    threads = a.cpu_threads or os.cpu_count()
    gpu = torch.cuda.is_available() and not a.no_gpu
    print(f"PyTorch {torch.__version__} stepping as Mamba2.step, fp32; "
          f"{torch.cuda.get_device_name() if gpu else 'no GPU'}; CPU {threads} threads; "
          f"stepping vs full forward (float64): max |diff| {stream_check():.2e}", flush=True)
    print(f"| torch | model | instruments | GPU eager us | GPU eager step() us | GPU graph us | GPU graph step() us "
          f"| CPU 1 thread us | CPU {threads} threads us |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    with torch.no_grad():
        for name in a.configs.split(","):
            for n in (int(v) for v in a.instruments.split(",")):
                row = [name, str(n)]
                if gpu:
                    model, Fe = stream_model(name, "cuda")
                    x = torch.randn(n, Fe, device="cuda")
                    bars = max(20, a.bars // 4) if n >= 1000 else a.bars
                    for graph in (False, True):
                        dev, host = time_gpu(model, x, bars, graph)
                        row += [f"{dev:.1f}", f"{host:.1f}"]
                    del model, x
                    torch.cuda.empty_cache()
                else:
                    row += ["-"] * 4
                if not a.no_cpu:
                    model, Fe = stream_model(name, "cpu")
                    x = torch.randn(n, Fe)
                    row += [f"{time_cpu(model, x, a.cpu_seconds, t):.1f}" for t in (1, threads)]
                else:
                    row += ["-"] * 2
                print("| torch | " + " | ".join(row) + " |", flush=True)
    return 0


def add_precision(parser, help_default):
    parser.add_argument("--precision", choices=PRECISIONS,
                        help="fp32; tf32 (matmuls and convolutions on tf32 tensor cores); bf16 (autocast to "
                             "bfloat16 around forward and loss, fp32 master weights and AdamW). " + help_default)
    parser.add_argument("--tf32", action="store_true", help="the older spelling of --precision tf32")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--checkpoint", required=True)
    c.add_argument("--features", required=True, help="the .npy features the predictions were made from")
    c.add_argument("--targets", help="the .npy targets (adds the masked-MSE comparison)")
    c.add_argument("--pred", required=True, help="pred.npy from `ml-alpha predict --split all`")
    c.add_argument("--tol", type=float, default=1e-4)
    b = sub.add_parser("bench")
    b.add_argument("--configs", default="S,M,L")
    b.add_argument("--steps", type=int, default=60)
    b.add_argument("--warmup", type=int, default=10)
    add_precision(b, "Every configuration runs in it (default: S and M fp32, L tf32).")
    cp = sub.add_parser("cpu", help="the training step on the CPU at the given thread counts")
    cp.add_argument("--configs", default="default,S")
    cp.add_argument("--threads", default=f"1,{len(__import__('os').sched_getaffinity(0))}")
    cp.add_argument("--steps", type=int, default=20)
    cp.add_argument("--warmup", type=int, default=2)
    o = sub.add_parser("bench-one", help="one configuration and mode (what bench runs per process)")
    o.add_argument("--config", required=True, choices=sorted(SHAPES))
    o.add_argument("--graph", action="store_true")
    o.add_argument("--steps", type=int, default=60)
    o.add_argument("--warmup", type=int, default=10)
    add_precision(o, "Default: fp32, L tf32.")
    st = sub.add_parser("stream", help="one bar at a time, as Mamba2.step (see above)")
    st.add_argument("--configs", default="S,M")
    st.add_argument("--instruments", default="1,100,5000")
    st.add_argument("--bars", type=int, default=200, help="bars per timed GPU repetition")
    st.add_argument("--cpu-seconds", type=float, default=2.0)
    st.add_argument("--cpu-threads", type=int, default=0, help="the all-threads CPU case (default: every CPU)")
    st.add_argument("--no-cpu", action="store_true")
    st.add_argument("--no-gpu", action="store_true")
    a = ap.parse_args()
    if a.cmd in ("bench", "bench-one"):
        a.chosen_precision = chosen_precision(a, b if a.cmd == "bench" else o)
    return {"check": cmd_check, "bench": cmd_bench, "bench-one": cmd_bench_one, "stream": cmd_stream,
            "cpu": cmd_cpu}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
