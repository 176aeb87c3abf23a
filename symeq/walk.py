"""The one derivation walk through the layers, over a row matcher (exact or float).

For a generator g = (rho_in(g), rho_out(g)), the latent actions rho_i(g) in K_i are found by one
walk (Shahverdi, Marchetti, Bokman, Kohn 2026, Theorem 4.1 and its proof; docs/theory.md):

1. **Forward, tie classes.**  With rho_{i-1}(g) known only up to permutations inside the tie
   classes of layer i-1 (neurons whose rows agree up to an admissible scaling: clones), the rows
   of theta^g's layer i are matched to the rows of theta through keys invariant under those
   permutations.  This fixes each neuron's tie class and admissible scale, a necessary condition.
2. **Backward, pairing by outgoing columns.**  The last layer fixes rho_L = rho_out(g), so inside
   each tie class of the last hidden layer the bijection is read off the outgoing columns
   (W_L rho_{L-1} = rho_out W_L, column by column); then rho's pre-activation part on that layer
   is known and the layer below is resolved the same way.  Interchangeable neurons (rows and
   columns agree) are paired in increasing order, which keeps g -> rho(g) a homomorphism.
3. **Bounded search.**  Only neurons whose rows agree as multisets but not as vectors, with
   columns that cannot tell them apart, are a real choice; the choices are searched depth first
   (:func:`multiset_assignments`) within a node budget.  Running out of nodes is no proof of
   anything: the callers report "undetermined", never "not equivariant".
4. **Homomorphism along the Cayley graph** (:func:`cayley_homomorphism`): two words in the
   generators that give the same input matrix must give the same latent actions.

Steps 1-3 are :class:`TieWalk`.  Where no rows tie, and through attention heads, step 1 alone
decides each layer: :class:`ChainWalk` goes forward layer by layer and ends with the last-layer
check.

What "match", "key" and "equal" mean is the row matcher's business (:class:`RowMatcher`): the exact
one hashes canonical rows over fmpq (``symeq.layerwise``); the float one uses linear assignment
with a tolerance and reports residuals and margins (``symeq.numeric.layerwise``).  This module
holds only the walk, so it sits below both and imports neither (docs/architecture.md).

Examples
--------
>>> list(multiset_assignments([2, 1], 3))
[(0, 0, 1), (0, 1, 0), (1, 0, 0)]
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

from .groups.core import _word  # words in the generators, written as the group closure writes them
from .layers.base import NoPartner  # raised by the layers' matching of actions; re-exported here

__all__ = ["RowMatcher", "ChainMatcher", "NoPartner", "TieWalk", "ChainWalk", "multiset_assignments", "CayleyResult",
           "cayley_homomorphism"]


class RowMatcher(Protocol):
    """What the walk asks of a row matcher (exact: ``symeq.layerwise._ExactMatcher``; float:
    ``symeq.numeric.layerwise._FloatMatcher``).  Any method may raise :class:`NoPartner`.

    ``hidden`` : the number of hidden layers L - 1.
    ``forward(A)`` : per hidden layer, theta^g's tie classes and scales (step 1).
    ``top(B, fwd)`` : the outgoing columns of the last hidden layer after rho_out(g).
    ``pair(li, Y, fwd)`` : (base, choices) for hidden layer li given the outgoing columns Y:
        ``base`` is the matcher's forced pairing, ``choices`` a list of ``(items, types)`` where
        each item must be paired with one target of ``types[t]`` (a list per type), each type used
        as often as it has targets (step 2).
    ``descend(li, base, picks, fwd)`` : (entry, Y below) from the pairing ``base`` completed by
        ``picks`` (a list of (item, target)); ``entry`` is stored as the layer's result.
    ``result(acc)`` : what the walk yields for one complete candidate (``acc[li]``: the entries).
    ``tick()`` : called once per node (a deadline check, or nothing).
    """

    hidden: int

    def forward(self, A) -> Any: ...

    def top(self, B, fwd) -> Any: ...

    def pair(self, li: int, Y, fwd) -> tuple[Any, list]: ...

    def descend(self, li: int, base, picks: list, fwd) -> tuple[Any, Any]: ...

    def result(self, acc: list) -> Any: ...

    def tick(self) -> None: ...


def multiset_assignments(sizes: Sequence[int], n: int) -> Iterator[tuple]:
    """Every sequence of n type indices using type t exactly sizes[t] times (distinct ones only).

    >>> list(multiset_assignments([1, 1], 2))
    [(0, 1), (1, 0)]
    """
    left = list(sizes)
    seq: list = []

    def rec():
        if len(seq) == n:
            yield tuple(seq)
            return
        for t in range(len(left)):
            if left[t]:
                left[t] -= 1
                seq.append(t)
                yield from rec()
                seq.pop()
                left[t] += 1

    yield from rec()


class TieWalk:
    """Steps 1-3 of the walk for one row matcher, with a node budget per generator.

    :meth:`run` yields the matcher's results for every complete candidate (exact: all of them;
    a float caller stops at the first within tolerance).  After a run, ``nodes`` is the number
    of nodes visited (one per layer reached, plus one per choice tried), ``capped`` whether the
    budget ran out (then the run is not exhaustive) and ``failure`` the last reason a branch died.

    Examples
    --------
    A matcher with one hidden layer whose two neurons tie as multisets: both pairings are tried.

    >>> class M:
    ...     hidden = 1
    ...     def forward(self, A): return None
    ...     def top(self, B, fwd): return None
    ...     def pair(self, li, Y, fwd): return {}, [([0, 1], [["a"], ["b"]])]
    ...     def descend(self, li, base, picks, fwd): return dict(picks), None
    ...     def result(self, acc): return acc[0]
    ...     def tick(self): pass
    >>> w = TieWalk(M(), max_nodes=100)
    >>> list(w.run(None, None)), w.nodes
    ([{0: 'a', 1: 'b'}, {0: 'b', 1: 'a'}], 5)
    >>> w = TieWalk(M(), max_nodes=2)
    >>> list(w.run(None, None)), w.capped
    ([], True)
    """

    def __init__(self, matcher: RowMatcher, max_nodes: int):
        self.matcher, self.max_nodes = matcher, max_nodes
        self.nodes, self.capped, self.failure = 0, False, None

    def run(self, A, B) -> Iterator:
        """Yield one result per complete candidate for the generator (A, B)."""
        self.nodes, self.capped, self.failure = 0, False, None
        m = self.matcher
        try:
            fwd = m.forward(A)
            Y = m.top(B, fwd)
        except NoPartner as e:
            self.failure = str(e)
            return
        yield from self._back(m.hidden - 1, Y, fwd, [None] * m.hidden)

    def _spend(self) -> bool:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            self.capped = True
            return False
        return True

    def _back(self, li: int, Y, fwd, acc: list) -> Iterator:
        """Resolve hidden layer li from Y, the outgoing columns after the action on layer li + 1."""
        if not self._spend():
            return
        self.matcher.tick()
        if li < 0:
            yield self.matcher.result(acc)
            return
        try:
            base, choices = self.matcher.pair(li, Y, fwd)
        except NoPartner as e:
            self.failure = str(e)
            return
        yield from self._choose(li, base, choices, 0, [], fwd, acc)

    def _choose(self, li: int, base, choices: list, t: int, picks: list, fwd, acc: list) -> Iterator:
        """Go through the real choices of layer li; then descend to the layer below."""
        if t == len(choices):
            try:
                entry, below = self.matcher.descend(li, base, picks, fwd)
            except NoPartner as e:
                self.failure = str(e)
                return
            acc = list(acc)
            acc[li] = entry
            yield from self._back(li - 1, below, fwd, acc)
            return
        items, types = choices[t]
        for order in multiset_assignments([len(ty) for ty in types], len(items)):
            if not self._spend():
                return
            used = [0] * len(types)
            more = []
            for item, ti in zip(items, order):
                more.append((item, types[ti][used[ti]]))
                used[ti] += 1
            yield from self._choose(li, base, choices, t + 1, picks + more, fwd, acc)
            if self.capped:
                return


class ChainMatcher(Protocol):
    """What :class:`ChainWalk` asks of a row matcher: ``hidden`` (L - 1); ``start(A)`` the action on
    the input; ``step(i, prev)`` the candidate (entry, action) pairs on hidden layer i + 1 given
    the action ``prev`` on its input (one when no rows tie); ``close(prev, B, acc)`` the result of
    a complete chain (the last-layer check); ``tick()`` once per node.  ``step`` and ``close`` may
    raise :class:`NoPartner`."""

    hidden: int

    def start(self, A) -> Any: ...

    def step(self, i: int, prev) -> Sequence: ...

    def close(self, prev, B, acc: list) -> Any: ...

    def tick(self) -> None: ...


class ChainWalk:
    """Step 1 of the walk without tie classes: layer by layer from the input, then the last layer.

    Used where no rows tie (each step then offers one action), for attention heads, and, on the
    exact path, for dead neurons under continuous scalings, where the matcher enumerates the
    bijections inside each class of equal rows (exponential in the class sizes, hence the node
    budget).  ``nodes``, ``capped``, ``failure`` as for :class:`TieWalk`; ``failure`` keeps the
    *first* reason a branch died (the deepest common prefix of the chains, the most telling one).

    Examples
    --------
    >>> class M:
    ...     hidden = 2
    ...     def start(self, A): return A
    ...     def step(self, i, prev): return [(prev + 1, prev + 1)]
    ...     def close(self, prev, B, acc): return acc, prev == B
    ...     def tick(self): pass
    >>> w = ChainWalk(M(), max_nodes=10)
    >>> list(w.run(0, 2)), w.nodes
    ([([1, 2], True)], 3)
    """

    def __init__(self, matcher: ChainMatcher, max_nodes: int):
        self.matcher, self.max_nodes = matcher, max_nodes
        self.nodes, self.capped, self.failure = 0, False, None

    def run(self, A, B) -> Iterator:
        """Yield the matcher's ``close`` result for every complete chain of the generator (A, B)."""
        self.nodes, self.capped, self.failure = 0, False, None
        yield from self._layer(0, self.matcher.start(A), [], B)

    def _fail(self, e: NoPartner) -> None:
        if self.failure is None:
            self.failure = str(e)
        if e.inconclusive:
            self.capped = True  # not a proof that no k exists

    def _layer(self, i: int, prev, acc: list, B) -> Iterator:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            self.capped = True
            return
        m = self.matcher
        m.tick()
        try:
            if i == m.hidden:
                yield m.close(prev, B, acc)
                return
            options = m.step(i, prev)
        except NoPartner as e:
            self._fail(e)
            return
        for entry, nxt in options:
            yield from self._layer(i + 1, nxt, acc + [entry], B)
            if self.capped:
                return


# -- step 4: the homomorphism along the Cayley graph ------------------------------------------

@dataclass
class CayleyResult:
    """Outcome of :func:`cayley_homomorphism`.

    ``worst`` : the largest deviation between two latent tuples reached by words with the same
    input matrix (exact: 0 or 1); ``order`` : input elements reached; ``too_large`` : the walk
    stopped past ``max_order``; ``conflict`` : the first violated relation, in words.
    """

    worst: Any
    order: int
    too_large: bool = False
    conflict: str | None = None


def cayley_homomorphism(inputs: Sequence, latents: Sequence[Sequence], *, compose: Callable, identity: Callable,
                        key: Callable, deviation: Callable, max_order: int, names: Sequence[str] | None = None,
                        what: Sequence[str] | None = None, stop_at_first: bool = False,
                        deadline=None) -> CayleyResult:
    """Whether g -> (rho_i(g))_i respects the relations of G, by breadth-first search on words.

    Two words reaching the same input element (same ``key``) must give the same latent tuple;
    ``deviation(x, y)`` measures how far two latent actions differ (exact: 0 or 1; float: max
    entrywise).  With ``stop_at_first`` the walk ends at the first nonzero deviation.  Uniqueness
    of k(g) makes g -> k(g) a homomorphism (proof of Theorem 4.1), so for a derived action a
    violated relation means the choice among non-unique k(g) was inconsistent.

    Parameters
    ----------
    inputs : the input matrix of each generator
    latents : per generator, the latent actions (one per component) to check
    compose, identity, key, deviation : the arithmetic of the backend
    max_order : stop (``too_large``) past this many input elements
    names, what : generator and component names for the conflict message

    Examples
    --------
    >>> import numpy as np
    >>> s = np.array([[0., 1.], [1., 0.]])
    >>> ops = dict(compose=lambda a, b: a @ b, identity=lambda a: np.eye(len(a)),
    ...            key=lambda a: a.tobytes(), deviation=lambda x, y: float(np.abs(x - y).max()), max_order=10)
    >>> r = cayley_homomorphism([s], [[-np.eye(1)]], **ops)
    >>> r.worst == 0, r.order
    (True, 2)
    >>> cayley_homomorphism([s], [[2 * np.eye(1)]], **ops).worst
    3.0
    """
    k = len(latents[0]) if latents else 0
    names = list(names) if names is not None else [f"g{i}" for i in range(len(inputs))]
    what = list(what) if what is not None else [f"component {c + 1}" for c in range(k)]
    start = (identity(inputs[0]), [identity(a) for a in latents[0]], ())
    seen = {key(start[0]): start}
    queue = deque([start])
    worst = 0
    conflict = None
    while queue:
        if deadline is not None:
            deadline.check("checking the homomorphism")
        m, lat, word = queue.popleft()
        for gi, a in enumerate(inputs):
            # the identity times a generator is the generator: skip the products
            if word:
                m2, lat2 = compose(m, a), [compose(x, y) for x, y in zip(lat, latents[gi])]
            else:
                m2, lat2 = a, list(latents[gi])
            kk = key(m2)
            other = seen.get(kk)
            if other is None:
                new = (m2, lat2, word + (gi,))
                seen[kk] = new
                queue.append(new)
                if len(seen) > max_order:
                    return CayleyResult(worst, len(seen), True, conflict)
                continue
            for c, (x, y) in enumerate(zip(other[1], lat2)):
                dev = deviation(x, y)
                if dev > worst:
                    worst = dev
                if dev and conflict is None:
                    conflict = (f"{what[c]} does not respect a relation of the group: the words "
                                f"{_word(word + (gi,), names)} and {_word(other[2], names)} give the same "
                                f"input matrix but different matrices for {what[c]}")
                if dev and stop_at_first:
                    return CayleyResult(worst, len(seen), False, conflict)
    return CayleyResult(worst, len(seen), False, conflict)
