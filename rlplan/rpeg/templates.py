"""RPEG templates: the vertices and edges of one RL step, and their unrolling.

A vertex is ``model.role``. Data edges connect vertices of the same step;
publication (pub) edges carry trained weights from a train vertex to the next
user of those weights. Unrolled over ``k_eval`` steps the graph has one *run*
per (vertex, step); the user of model m's weights at step t waits for m's
train run at step ``t - 1 - staleness[m]`` (no wait when that is negative),
and the runs of one vertex follow each other (chain edges).

With old log-probs recomputed (``engine.recompute_logprobs``, the default)
every template gains ``actor.infer``: a forward pass of the actor over the
samples, between ``actor.generate`` and ``actor.train``. Its pub edge from
``actor.train`` is *synchronous*: it always uses the latest weights (the
train run of step t-1), whatever staleness the rollout has — off-policy
samples are scored by the current policy, as in decoupled PPO.

AC-share (PPO only, ``fused=True``): actor and critic become one model ``ac``
(the actor's architecture plus a scalar value head). Its template has the
vertices ``actor.generate`` (the rollout, run on the ``ac`` weights),
``reference.infer``, ``reward.infer``, ``ac.infer`` (one forward giving old
log-probs and values; it replaces ``critic.infer`` and, where it exists,
``actor.infer``) and ``ac.train`` (policy and value loss in one backward; it
replaces ``actor.train`` and ``critic.train``). Data edges: generate -> each
infer -> ``ac.train``. Pub edges: ``ac.train -> actor.generate`` with the
``ac`` staleness (``staleness_candidates.ac_share``), and ``ac.train ->
ac.infer``, which takes the ``ac`` staleness as ``critic.train ->
critic.infer`` takes the critic's, except that it is synchronous when old
log-probs are recomputed (``ac.infer`` then replaces ``actor.infer``, whose
log-probs must come from the current policy).

Rule reward (``models.reward: {kind: rule}``): the reward is a function run on
CPU workers, not a model, so the template has no ``reward.infer``. Its place
in the graph becomes a fixed *delay* on the data edges that replace it:
``actor.generate`` -> each consumer of the reward (``actor.train`` in GRPO,
``actor.train`` and ``critic.train`` in PPO, ``ac.train`` in AC-share), each
carrying :attr:`Edge.delay_s` (the stage's seconds) and the stage's name
:data:`RULE_STAGE`. A consumer then starts no earlier than the rollout's end
plus the delay (plus the data transfer between their blocks). An edge that
already joins the rollout to the consumer keeps one edge with the larger
constraint (docs/templates.md, "Rule rewards").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

#: Names of the two PPO templates a plan may use (``template`` in plan files).
SEPARATE = "separate"
FUSED = "ac_share"
#: The fused actor-critic model of the AC-share template.
AC_MODEL = "ac"
#: The name of a rule reward's CPU stage (on the data edges that carry its delay).
RULE_STAGE = "reward.rule"
#: The vertex a rule reward replaces, and the vertex whose samples it scores.
REWARD_VERTEX, ROLLOUT_VERTEX = "reward.infer", "actor.generate"


class Kind(Enum):
    """What a vertex computes."""

    GENERATE = "generate"
    INFER = "infer"
    TRAIN = "train"


@dataclass(frozen=True)
class Vertex:
    """One vertex of the template, e.g. ``actor.generate``.

    ``model`` is the model whose weights the vertex runs (its cost, memory
    and pub edges follow it); ``label`` names the vertex when that differs
    from the model: the fused template's rollout runs the ``ac`` weights but
    is still called ``actor.generate``.
    """

    model: str
    kind: Kind
    label: str | None = None

    @property
    def name(self) -> str:
        """``model.kind`` (``label.kind`` when labelled) as written in plan files."""
        return f"{self.label or self.model}.{self.kind.value}"


@dataclass(frozen=True)
class Edge:
    """A template edge between vertex indices.

    ``kind`` is ``"data"`` (same step) or ``"pub"`` (weights of ``model``
    from its train vertex to a user in a later step). A ``synchronous`` pub
    edge ignores the model's staleness (always 0). A data edge may carry a
    plan-independent ``delay_s`` (seconds) added to its lag, the time of the
    CPU ``stage`` between its endpoints (a rule reward, :data:`RULE_STAGE`).
    """

    src: int
    dst: int
    kind: str
    model: str | None = None
    synchronous: bool = False
    delay_s: float = 0.0
    stage: str | None = None

    @property
    def staleness_model(self) -> str | None:
        """The model whose staleness decides this pub edge (None: fixed at 0)."""
        return None if self.synchronous else self.model


@dataclass(frozen=True)
class Template:
    """The RPEG of one algorithm: vertices in template order and edges."""

    algorithm: str
    vertices: tuple[Vertex, ...]
    data_edges: tuple[Edge, ...]
    pub_edges: tuple[Edge, ...]
    fused: bool = False

    @property
    def kind(self) -> str:
        """:data:`FUSED` for the AC-share template, else :data:`SEPARATE`."""
        return FUSED if self.fused else SEPARATE

    def index(self, name: str) -> int:
        """Template index of the vertex called ``name``."""
        for position, vertex in enumerate(self.vertices):
            if vertex.name == name:
                return position
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        """Vertex names in template order."""
        return tuple(vertex.name for vertex in self.vertices)

    @property
    def trained_models(self) -> tuple[str, ...]:
        """Models with a train vertex, in template order."""
        return tuple(v.model for v in self.vertices if v.kind is Kind.TRAIN)

    @property
    def stage_edges(self) -> tuple[Edge, ...]:
        """The data edges carrying a CPU stage (a rule reward's), in data-edge order."""
        return tuple(edge for edge in self.data_edges if edge.stage is not None)

    @property
    def data_delays(self) -> tuple[float, ...]:
        """The delay (seconds) of every data edge, in data-edge order."""
        return tuple(edge.delay_s for edge in self.data_edges)

    def depths(self) -> tuple[int, ...]:
        """Longest-path depth of each vertex over the data edges."""
        depth = [0] * len(self.vertices)
        for position in range(len(self.vertices)):  # template order is topological
            for edge in self.data_edges:
                if edge.dst == position:
                    depth[position] = max(depth[position], depth[edge.src] + 1)
        return tuple(depth)


def _data_edges(
    position: dict[str, int], data: list[tuple[str, str]], delays: dict[tuple[str, str], float]
) -> tuple[Edge, ...]:
    """Data edges between named vertices; those in ``delays`` carry the rule stage."""
    return tuple(
        Edge(position[src], position[dst], "data")
        if (src, dst) not in delays
        else Edge(
            position[src], position[dst], "data", delay_s=delays[(src, dst)], stage=RULE_STAGE
        )
        for src, dst in data
    )


def _without_reward(
    names: list[str], data: list[tuple[str, str]], delay: float
) -> tuple[list[str], list[tuple[str, str]], dict[tuple[str, str], float]]:
    """Drop ``reward.infer``: the rollout feeds each of its consumers through the rule's delay.

    An edge rollout -> consumer that already exists stays one edge, with the
    larger delay (its lag plus the delay is the larger constraint).
    """
    consumers = [dst for src, dst in data if src == REWARD_VERTEX]
    kept = [edge for edge in data if REWARD_VERTEX not in edge]
    delays: dict[tuple[str, str], float] = {}
    for consumer in consumers:
        edge = (ROLLOUT_VERTEX, consumer)
        if edge not in kept:
            kept.append(edge)
        delays[edge] = max(delays.get(edge, 0.0), delay)
    return [name for name in names if name != REWARD_VERTEX], kept, delays


def _build(
    algorithm: str,
    vertex_names: list[str],
    data: list[tuple[str, str]],
    delays: dict[tuple[str, str], float] | None = None,
) -> Template:
    vertices = []
    for name in vertex_names:
        model, kind = name.split(".")
        vertices.append(Vertex(model, Kind(kind)))
    position = {vertex.name: index for index, vertex in enumerate(vertices)}
    data_edges = _data_edges(position, data, delays or {})
    pub_edges = []
    for vertex in vertices:
        if vertex.kind is not Kind.TRAIN:
            continue
        users = [v for v in vertices if v.model == vertex.model and v.kind is not Kind.TRAIN]
        for rank, user in enumerate(users):
            pub_edges.append(
                Edge(
                    position[vertex.name],
                    position[user.name],
                    "pub",
                    model=vertex.model,
                    synchronous=rank > 0,
                )
            )
    return Template(algorithm, tuple(vertices), data_edges, tuple(pub_edges))


#: Vertices and data edges per algorithm, without ``actor.infer``.
_TEMPLATES: dict[str, tuple[list[str], list[tuple[str, str]]]] = {
    "ppo": (
        [
            "actor.generate",
            "reference.infer",
            "reward.infer",
            "critic.infer",
            "actor.train",
            "critic.train",
        ],
        [
            ("actor.generate", "reference.infer"),
            ("actor.generate", "reward.infer"),
            ("actor.generate", "critic.infer"),
            ("reference.infer", "actor.train"),
            ("reward.infer", "actor.train"),
            ("critic.infer", "actor.train"),
            ("reward.infer", "critic.train"),
            ("critic.infer", "critic.train"),
        ],
    ),
    "grpo": (
        ["actor.generate", "reference.infer", "reward.infer", "actor.train"],
        [
            ("actor.generate", "reference.infer"),
            ("actor.generate", "reward.infer"),
            ("reference.infer", "actor.train"),
            ("reward.infer", "actor.train"),
        ],
    ),
    "dpo": (
        ["actor.generate", "reference.infer", "actor.train"],
        [("actor.generate", "reference.infer"), ("reference.infer", "actor.train")],
    ),
}


def _build_fused(
    recompute_logprobs: bool, reference_model: bool, reward_delay: float | None = None
) -> Template:
    """The PPO template with actor and critic fused into ``ac`` (see the module docstring)."""
    vertices = [Vertex(AC_MODEL, Kind.GENERATE, label="actor")]
    if reference_model:
        vertices.append(Vertex("reference", Kind.INFER))
    vertices += [
        Vertex("reward", Kind.INFER),
        Vertex(AC_MODEL, Kind.INFER),
        Vertex(AC_MODEL, Kind.TRAIN),
    ]
    infers = [v.name for v in vertices if v.kind is Kind.INFER]
    data = [("actor.generate", name) for name in infers] + [(name, "ac.train") for name in infers]
    delays: dict[tuple[str, str], float] = {}
    if reward_delay is not None:
        names, data, delays = _without_reward([v.name for v in vertices], data, reward_delay)
        vertices = [v for v in vertices if v.name in names]
    position = {vertex.name: index for index, vertex in enumerate(vertices)}
    data_edges = _data_edges(position, data, delays)
    train = position["ac.train"]
    pub_edges = (
        Edge(train, position["actor.generate"], "pub", model=AC_MODEL),
        Edge(train, position["ac.infer"], "pub", model=AC_MODEL, synchronous=recompute_logprobs),
    )
    return Template("ppo", tuple(vertices), data_edges, pub_edges, fused=True)


def build_template(
    algorithm: str,
    recompute_logprobs: bool = False,
    reference_model: bool = True,
    fused: bool = False,
    reward_delay: float | None = None,
) -> Template:
    """Return the RPEG template of ``algorithm`` (``ppo``, ``grpo`` or ``dpo``).

    Parameters
    ----------
    algorithm
        The RL algorithm.
    recompute_logprobs
        Add ``actor.infer`` (old log-probs by the actor): data edges
        ``actor.generate -> actor.infer -> actor.train`` and a synchronous pub
        edge ``actor.train -> actor.infer``.
    reference_model
        Keep ``reference.infer`` (a KL term); without it the vertex and its
        edges are dropped (KL-free recipes such as DAPO).
    fused
        The AC-share template (PPO only): actor and critic fused into ``ac``.
    reward_delay
        Seconds of a rule reward's CPU stage: ``reward.infer`` is dropped and
        ``actor.generate`` feeds its consumers through edges carrying this
        delay (see the module docstring). None (the default): the reward is
        a model and keeps its vertex. Ignored by DPO, which has no reward.
    """
    if algorithm not in _TEMPLATES:
        raise ValueError(f"unknown algorithm {algorithm!r}")
    if fused:
        if algorithm != "ppo":
            raise ValueError(f"the fused actor-critic template is PPO only, not {algorithm}")
        return _build_fused(recompute_logprobs, reference_model, reward_delay)
    names, data = _TEMPLATES[algorithm]
    names, data = list(names), list(data)
    if not reference_model:
        names.remove("reference.infer")
        data = [edge for edge in data if "reference.infer" not in edge]
    if recompute_logprobs:
        names.insert(1, "actor.infer")
        data = [
            ("actor.generate", "actor.infer"),
            *data,
            ("actor.infer", "actor.train"),
        ]
    delays: dict[tuple[str, str], float] = {}
    if reward_delay is not None and REWARD_VERTEX in names:
        names, data, delays = _without_reward(names, data, reward_delay)
    return _build(algorithm, names, data, delays)


@dataclass(frozen=True)
class RunEdge:
    """An edge of the unrolled graph between run ids.

    ``template_edge`` indexes ``data_edges`` then ``pub_edges`` of the
    template (so lags are computed once per template edge); chain edges
    (a vertex's previous run) have ``template_edge = -1`` and lag 0.
    """

    src: int
    dst: int
    template_edge: int


def run_id(vertex: int, step: int, num_vertices: int) -> int:
    """Run id of (vertex, step): runs are numbered step-major, template order within."""
    return step * num_vertices + vertex


def unroll(template: Template, k_eval: int, staleness: dict[str, int]) -> tuple[RunEdge, ...]:
    """Edges of the graph unrolled over ``k_eval`` steps for the given staleness.

    Parameters
    ----------
    template
        The step's template.
    k_eval
        Number of steps.
    staleness
        Staleness per trained model.
    """
    count = len(template.vertices)
    edges: list[RunEdge] = []
    for step in range(k_eval):
        for index, edge in enumerate(template.data_edges):
            edges.append(
                RunEdge(run_id(edge.src, step, count), run_id(edge.dst, step, count), index)
            )
        for index, edge in enumerate(template.pub_edges):
            key = edge.staleness_model
            source_step = step - 1 - (staleness[key] if key is not None else 0)
            if source_step >= 0:
                edges.append(
                    RunEdge(
                        run_id(edge.src, source_step, count),
                        run_id(edge.dst, step, count),
                        len(template.data_edges) + index,
                    )
                )
        if step > 0:
            for vertex in range(count):
                edges.append(
                    RunEdge(run_id(vertex, step - 1, count), run_id(vertex, step, count), -1)
                )
    return tuple(edges)
