"""YAML read strictly: a key given twice in one mapping is an error naming both lines, and a
document nested deeper than MAX_DEPTH is refused before it is built (PyYAML builds nested
collections recursively, so a hostile file would otherwise end in a RecursionError).

No dependencies beyond PyYAML: suites, and anything else a user writes in YAML, load through
`load_text`, which raises StrictYamlError (a ValueError) with a message that names the file.
"""

from __future__ import annotations

import yaml

MAX_DEPTH = 32  # a suite is at most 5 deep (include -> rule -> fanout -> list); far more is a mistake


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


def _depth(node) -> tuple[int, yaml.Node]:
    """The deepest nesting of collections under `node`, and a node at that depth (iteratively)."""
    deepest, at = 0, node
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > deepest:
            deepest, at = depth, current
        if isinstance(current, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in current.value)
        elif isinstance(current, yaml.MappingNode):
            stack.extend((child, depth + 1) for pair in current.value for child in pair)
    return deepest, at


def load_text(text: str, where: str):
    """The one document in `text`; `where` (a file name) starts every error message."""
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise StrictYamlError(f"{where}: nested deeper than {MAX_DEPTH} levels; allowed: at most "
                                  f"{MAX_DEPTH}") from None
        if node is None:
            return None
        depth, deepest = _depth(node)
        if depth > MAX_DEPTH:
            raise StrictYamlError(f"{where}: line {deepest.start_mark.line + 1}: nested {depth} levels deep; "
                                  f"allowed: at most {MAX_DEPTH}")
        try:
            return loader.construct_document(node)
        except StrictYamlError as exc:
            raise StrictYamlError(f"{where}: {exc}") from None
    finally:
        loader.dispose()
