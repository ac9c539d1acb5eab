"""Readable budget tables (the seed's layout: each buffer in KB, total, cap, free, blocks/SM, occupancy) and
the bar figure."""

from __future__ import annotations

KB = 1024


def _kb(n: int) -> str:
    return f"{n / KB:7.1f}"


def table(b) -> str:
    """The budget ``b`` (flashsim.resources.Budget) as a text table."""
    c, a, o = b.config, b.arch, b.occ
    title = f"{b.label}: " if b.label else ""
    lines = [f"{title}{a.name} ({a.family}); {c.describe()}", f"  {'buffer':<22}{'KB':>7} {'bytes':>8}   expression"]
    exprs = b.expressions["smem"]
    for name, nbytes in b.breakdown.items():
        lines.append(f"  {name:<22}{_kb(nbytes)} {nbytes:>8}   {exprs[name]}")
    frag = b.fragment_registers
    lines.append(
        f"  {'O accumulator':<22}{_kb(0)} {0:>8}   in registers: {frag['O accumulator']} per thread ({c.pv_accum})"
    )
    if b.static_smem_bytes:
        lines.append(f"  {'static (ptxas)':<22}{_kb(b.static_smem_bytes)} {b.static_smem_bytes:>8}")
    lines += [
        f"  {'total':<22}{_kb(b.smem_bytes)} {b.smem_bytes:>8}   {b.expressions['smem_total']}",
        f"  {'cap (opt-in, block)':<22}{_kb(b.cap_bytes)} {b.cap_bytes:>8}",
        f"  {'free':<22}{_kb(b.free_bytes)} {b.free_bytes:>8}",
        f"  {'+ reserved (runtime)':<22}{_kb(a.smem_reserved_per_block)} {a.smem_reserved_per_block:>8}"
        f"   per block: {o.smem_per_block} B of {a.smem_per_sm} B per SM",
        f"  fits: {'yes' if b.fits else 'NO'}",
        f"  registers/thread: {b.registers} [{b.registers_source}]"
        + (f", spills {b.reg.spill_stores}/{b.reg.spill_loads} B" if b.reg.compiled else ""),
        "    live fragments: " + ", ".join(f"{k} {v}" for k, v in frag.items()),
        f"  blocks/SM: {o.blocks_per_sm} (limited by {o.limiter}; "
        + ", ".join(f"{k} {v}" for k, v in o.limits.items())
        + ")",
        f"  occupancy: {o.warps_per_sm}/{o.max_warps_per_sm} warps = {100 * b.occupancy:.1f}%",
    ]
    return "\n".join(lines)


def plot(budgets, path) -> None:
    """Horizontal stacked bars, one per budget: each buffer, the free space and the cap, like the seed's figure."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(
            "--plot needs matplotlib: pip install 'flashsim[plot]' (or pip install matplotlib)"
        ) from None
    budgets = list(budgets)
    names = []
    for b in budgets:
        names += [n for n in b.breakdown if n not in names]
    colours = dict(zip(names, plt.get_cmap("tab10").colors))
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.9 * len(budgets)))
    for i, b in enumerate(budgets):
        left = 0.0
        for name, nbytes in b.breakdown.items():
            w = nbytes / KB
            ax.barh(
                i,
                w,
                left=left,
                color=colours[name],
                edgecolor="white",
                label=name if i == 0 or name not in budgets[0].breakdown else None,
            )
            if w >= 10:
                ax.text(
                    left + w / 2,
                    i,
                    f"{name.split(' (')[0]}\n{w:.0f} KB",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white",
                )
            left += w
        free = b.free_bytes / KB
        if free > 0:
            ax.barh(i, free, left=left, color="#dddddd", edgecolor="white")
            if free >= 10:
                ax.text(left + free / 2, i, f"free\n{free:.0f} KB", ha="center", va="center", fontsize=7)
        ax.axvline(b.cap_bytes / KB, color="black", lw=1, ls="--")
        ax.text(
            max(left, b.cap_bytes / KB) + 1,
            i,
            f"{b.smem_bytes / KB:.0f} / {b.cap_bytes / KB:.0f} KB, {b.blocks_per_sm} block/SM, "
            f"{100 * b.occupancy:.0f}% occ." + ("" if b.fits else "  DOES NOT FIT"),
            va="center",
            fontsize=8,
        )
    ax.set_yticks(
        range(len(budgets)), [b.label or f"{b.arch.name} d={b.config.head_dim} Bc={b.config.kv_tile}" for b in budgets]
    )
    ax.invert_yaxis()
    ax.set_xlabel("shared memory per block (KB); dashed: the arch's per-block cap; O accumulator: 0 KB (registers)")
    xmax = max(max(b.smem_bytes, b.cap_bytes) for b in budgets) / KB
    ax.set_xlim(0, xmax * 1.75)
    ax.set_title("flashsim budget: shared memory of one attention block")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
