"""YAML read strictly: a key given twice in one mapping is an error naming both lines; a document
nested deeper than MAX_DEPTH is refused before it is built (PyYAML builds recursively); aliases are
allowed, but a document that would expand to more than MAX_VALUES values, or an alias inside its
own anchor, is refused ("billion laughs"), as is a text over MAX_BYTES before it is parsed.
`load_text` raises StrictYamlError naming the file.
"""

from __future__ import annotations

import yaml

MAX_BYTES = 2 * 2**20  # a suite is a few kB; PyYAML takes about 6 s and 80 MB of memory a MB it parses

MAX_DEPTH = 32  # a suite is at most 5 deep (include -> rule -> fanout -> list); far more is a mistake
MAX_VALUES = 100_000  # scalars and collections once aliases are expanded; a suite has a few hundred


class StrictYamlError(ValueError):
    pass


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)  # merge keys (<<) expand first: a merge may override
            seen: dict = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # SafeLoader reports an unhashable key itself
                if key in seen:
                    first = seen[key]
                    raise StrictYamlError(
                        f"line {key_node.start_mark.line + 1}: key {key!r} is given twice in one mapping "
                        f"(first on line {first.start_mark.line + 1}); allowed: each key once")
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _expanded(node) -> tuple[int, int, yaml.Node, int]:
    """(values, depth, the deepest node, nodes) of the document under `node` as built, aliases expanded but
    each node counted once (never walking an expansion), iteratively (a deep file cannot exhaust the
    stack). StrictYamlError for an alias inside its own anchor (a document that never ends)."""
    done: dict[int, tuple[int, int, yaml.Node]] = {}
    open_nodes: set[int] = set()
    stack = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        key = id(current)
        if key in done:
            continue
        children = ([] if isinstance(current, yaml.ScalarNode) else current.value
                    if isinstance(current, yaml.SequenceNode) else [c for pair in current.value for c in pair])
        if not children_done:
            open_nodes.add(key)
            stack.append((current, True))
            for child in children:
                if id(child) in open_nodes and id(child) not in done:  # only an alias inside its anchor
                    raise StrictYamlError(f"line {child.start_mark.line + 1}: an alias refers to a collection "
                                          "that holds it (a document without end); allowed: aliases to "
                                          "finished anchors")
                stack.append((child, False))
            continue
        found = [done[id(child)] for child in children]
        depth, deepest = max(((d + 1, n) for _, d, n in found), key=lambda p: p[0], default=(1, current))
        done[key] = (1 + sum(v for v, _, _ in found), depth, deepest)  # deepest: the first at that depth
        open_nodes.discard(key)
    return (*done[id(node)], len(done))


def load_text(text: str, where: str):
    """The one document in `text`; `where` (a file name) starts every error message."""
    if len(text) > MAX_BYTES:  # its parse spared: minutes and gigabytes for 100 MB
        raise StrictYamlError(f"{where}: {len(text.encode()):,} bytes; allowed: at most {MAX_BYTES:,}")
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise StrictYamlError(f"{where}: nested deeper than {MAX_DEPTH} levels; allowed: at most "
                                  f"{MAX_DEPTH}") from None
        if node is None:
            return None
        try:  # `where` is put before each message (the except below)
            values, depth, deepest, distinct = _expanded(node)
            if depth > MAX_DEPTH:
                raise StrictYamlError(f"line {deepest.start_mark.line + 1}: nested {depth} levels deep; "
                                      f"allowed: at most {MAX_DEPTH}")
            if values > MAX_VALUES:
                raise StrictYamlError((f"its aliases expand to {values:,} values (an alias bomb?)"
                                       if distinct < values else f"holds {values:,} values")
                                      + f"; allowed: at most {MAX_VALUES:,} values, aliases expanded")
            return loader.construct_document(node)
        except StrictYamlError as exc:
            raise StrictYamlError(f"{where}: {exc}") from None
    finally:
        loader.dispose()
