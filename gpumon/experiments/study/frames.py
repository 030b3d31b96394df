"""``--profile``: where Python time goes (py-spy speedscope recordings), exclusive vs shared per job."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpumon.core.records.decode import read_json
from gpumon.experiments.study.pairwise import keys_of
from gpumon.experiments.study.results import (
    NA,
    Context,
    fmt,
    fmt_share,
    md_table,
    recorded_profiles,
)
from gpumon.experiments.study.similarity import jaccard, pooled, shares, weighted_jaccard

TOP = 10


@dataclass(frozen=True)
class Recording:
    """One py-spy recording: sampled seconds per frame, as the leaf (self) and anywhere in the stack."""

    job: str
    partner: str | None
    self_s: dict[str, float]
    total_s: dict[str, float]


def frame_name(frame: dict) -> str:
    where = Path(str(frame.get("file", "?"))).name
    return f"{frame.get('name', '?')} ({where}:{frame.get('line', '?')})"


def read_speedscope(path: Path, job: str, partner: str | None) -> Recording | None:
    """Self and inclusive time per frame over every thread of a py-spy speedscope file."""
    try:
        data = read_json(path, max_bytes=256 << 20)  # a py-spy recording
        names = [frame_name(f) for f in data["shared"]["frames"]]
        profiles = data["profiles"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    self_s: dict[str, float] = {}
    total_s: dict[str, float] = {}
    for profile in profiles:
        for stack, weight in zip(profile.get("samples", []), profile.get("weights", [])):
            if not stack:
                continue
            leaf = names[stack[-1]]
            self_s[leaf] = self_s.get(leaf, 0.0) + weight
            for name in {names[i] for i in stack}:
                total_s[name] = total_s.get(name, 0.0) + weight
    return Recording(job, partner, self_s, total_s) if self_s else None


def load_recordings(ctx: Context) -> list[Recording]:
    recordings = (
        read_speedscope(path, key, partner)
        for path, key, partner in recorded_profiles(ctx, "pyspy")
    )
    return [r for r in recordings if r is not None]


def frames_section(ctx: Context) -> list[str]:
    """Top frames alone and shared per job, and how similar the two are (Jaccard of the frame sets)."""
    recordings = load_recordings(ctx)
    if not recordings:
        return []
    lines = [
        "## Where Python time goes (py-spy)",
        "",
        "Sampled with `py-spy record --nonblocking` from the moment every job of a cell was past its warm-up "
        "until it stopped (speedscope JSON in each run directory). Self time = samples where the frame was "
        "running; Jaccard = |frames alone ∩ frames shared| / |union| over every frame seen; weighted Jaccard "
        "compares the self-time shares.",
        "",
    ]
    rows = similarity_rows(ctx, recordings)
    if rows:
        lines += md_table(
            ["job", "co-runner", "Jaccard of frame sets", "weighted Jaccard (self time)"], rows
        ) + [""]
    for job in keys_of(ctx):
        lines += top_frames(job, recordings)
    return lines


def similarity_rows(ctx: Context, recordings: list[Recording]) -> list[list[str]]:
    """One row per job and co-runner: how alike its frames alone and shared are (plain and weighted Jaccard)."""
    rows = []
    for job in keys_of(ctx):
        alone = [r for r in recordings if r.job == job and r.partner is None]
        if not alone:
            continue
        alone_self = pooled(r.self_s for r in alone)
        alone_frames = set(pooled(r.total_s for r in alone))
        for partner in keys_of(ctx):
            shared = [r for r in recordings if r.job == job and r.partner == partner]
            if shared:
                rows.append(
                    [
                        job,
                        partner,
                        fmt(jaccard(alone_frames, pooled(r.total_s for r in shared)), 2),
                        fmt(
                            weighted_jaccard(
                                shares(alone_self), shares(pooled(r.self_s for r in shared))
                            ),
                            2,
                        ),
                    ]
                )
    return rows


def top_frames(job: str, recordings: list[Recording]) -> list[str]:
    """``job``'s top frames by self time, alone and shared (nothing when it was recorded neither way)."""
    alone_shares = shares(
        pooled(r.self_s for r in recordings if r.job == job and r.partner is None)
    )
    shared_shares = shares(
        pooled(r.self_s for r in recordings if r.job == job and r.partner is not None)
    )
    if not alone_shares and not shared_shares:
        return []
    order = sorted(
        set(alone_shares) | set(shared_shares),
        key=lambda f: alone_shares.get(f, 0.0) + shared_shares.get(f, 0.0),
        reverse=True,
    )
    table = [
        [
            f"`{f}`",
            fmt_share(alone_shares.get(f, 0.0)) if alone_shares else NA,
            fmt_share(shared_shares.get(f, 0.0)) if shared_shares else NA,
        ]
        for f in order[:TOP]
    ]
    return [
        f"### {job}: top frames by self time",
        "",
        *md_table(["frame", "alone", "shared"], table),
        "",
    ]
