"""RaySnapshot → what a person reads: verdict, evidence, then node → process → threads, refusals with fixes."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text
from rich.tree import Tree

from engdiag.render.human import evidence_table, heading, reasons, steps, verdict_line
from engdiag.render.snapshot_view import _process_node
from engdiag.snapshot.ray_capture import RayProcess, RaySnapshot
from engdiag.units import plural


def _label(process: RayProcess) -> Text:
    target = process.target
    text = Text()
    if target.kind == "actor":
        text.append(f"{target.class_name}", style="bold magenta")
        text.append(f" {target.actor_id[:8] if target.actor_id else ''}", style="dim")
        if target.name:
            text.append(f" '{target.name}'")
    else:
        text.append("driver", style="bold magenta")
    text.append(f"  job {target.job_id}", style="dim")
    if target.gpus or target.gpu_ids:
        text.append(f"  GPU {', '.join(g.split(':')[0] for g in target.gpu_ids) or f'×{target.gpus:g}'}", style="dim")
    return text


def _nodes(snapshot: RaySnapshot) -> Tree:
    nodes = len({p.target.node_id or p.target.node_ip for p in snapshot.processes})
    root = Tree(Text(f"Ray {snapshot.ray_version or '?'} at {snapshot.address}: "
                     f"{plural(len(snapshot.processes), 'process', 'processes')} on {plural(nodes, 'node')}, "
                     f"{plural(snapshot.options.samples, 'sample')} {snapshot.options.interval_s:g} s apart", style="bold"))
    names = {n.node_id: n for n in snapshot.nodes}
    by_node: dict[str, list[RayProcess]] = {}
    for process in snapshot.processes:
        by_node.setdefault(process.target.node_id or f"ip {process.target.node_ip}", []).append(process)
    for key, members in by_node.items():
        node = names.get(key)
        title = Text(f"node {members[0].target.node_ip}", style="bold cyan")
        title.append(f"  {key[:12]}{' (head)' if node and node.head else ''}", style="dim")
        branch = root.add(title)
        for process in members:
            leaf = branch.add(_label(process))
            leaf.add(_process_node(process.report))
            if process.fix:
                leaf.add(Text(f"fix: {process.fix}", style="yellow"))
    return root


def ray_snapshot_view(snapshot: RaySnapshot) -> RenderableType:
    """Verdict first, then the cluster's processes grouped by node, then reasons and next steps."""
    verdict = snapshot.verdict
    parts: list[RenderableType] = [verdict_line(verdict)]
    if verdict.evidence:
        parts += [heading("Evidence"), evidence_table(verdict)]
    if snapshot.cluster_errors:
        parts.append(heading("Cluster"))
        for refusal in snapshot.cluster_errors:
            parts.append(Text(f"{refusal.message}" + (f"\n  fix: {refusal.fix}" if refusal.fix else ""), style="yellow"))
    if len(snapshot.jobs) > 1:
        parts.append(heading("Jobs"))
        parts += [Text(f"job {job.job_id}: {job.verdict.headline}") for job in snapshot.jobs]
    parts += [heading("Nodes"), _nodes(snapshot)]
    if snapshot.skipped:
        parts += [Text(line, style="dim") for line in snapshot.skipped]
    if verdict.notes or verdict.ruled_out or verdict.undecided:
        parts += [heading("Why"), reasons(verdict)]
    parts += [heading("Next steps"), steps(verdict)]
    return Group(*parts)
