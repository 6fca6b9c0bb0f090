"""Reading a policy's YAML safely: a key given twice, aliases that expand without bound ("billion
laughs"), nesting deep enough to overflow a parser, a NUL byte no SQL literal can hold. Each is one
line naming the file, before any Python object is built from the document.

Kept apart from :mod:`sqlanon.policy`, which validates what this returns.
"""

from __future__ import annotations

from typing import Any

import yaml

from sqlanon.errors import PolicyError


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice (a column declared twice with two roles)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, list | dict):
            # ``? [a, b]`` is valid YAML, but no policy key is a list; ``key in seen`` would raise.
            raise PolicyError(
                f"policy: the key on line {key_node.start_mark.line + 1} is a "
                f"{'list' if isinstance(key, list) else 'mapping'}; a key must be a single text or number"
            )
        if key in seen:
            raise PolicyError(f"policy key {key!r}: declared twice (line {key_node.start_mark.line + 1})")
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

_FastLoader: type | None = None
if getattr(yaml, "__with_libyaml__", False):

    class _CUniqueKeyLoader(yaml.CSafeLoader):
        """The same loader on libyaml: parsing a 10 MB policy takes seconds instead of 40."""

    _CUniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    _FastLoader = _CUniqueKeyLoader


#: Refuse policy files larger than this before parsing them (a 50 MB policy took 89 s to parse).
MAX_POLICY_BYTES = 10 * 1024 * 1024
#: Refuse YAML whose aliases expand to more nodes than this ("billion laughs").
MAX_YAML_NODES = 1_000_000
#: Refuse YAML nested deeper than this (PyYAML recurses; 20,000 levels overflowed the stack).
MAX_YAML_DEPTH = 200


def _expanded_size(node: yaml.Node, what: str) -> int:
    """Nodes the document would construct, aliases expanded (memoised per node, so a bomb is
    counted in time linear in its text, not in its expansion)."""
    memo: dict[int, int] = {}
    # Iterative post-order walk: no recursion, whatever the depth.
    stack: list[tuple[yaml.Node, int, bool]] = [(node, 0, False)]
    while stack:
        n, depth, done = stack.pop()
        if id(n) in memo:
            continue
        if depth > MAX_YAML_DEPTH:
            raise PolicyError(f"{what}: nested more than {MAX_YAML_DEPTH} levels deep")
        children: list[yaml.Node] = []
        if isinstance(n, yaml.SequenceNode):
            children = list(n.value)
        elif isinstance(n, yaml.MappingNode):
            children = [x for kv in n.value for x in kv]
        if done or not children:
            memo[id(n)] = 1 + sum(memo[id(c)] for c in children)
            if memo[id(n)] > MAX_YAML_NODES:
                raise PolicyError(
                    f"{what}: expands to more than {MAX_YAML_NODES:,} values (YAML aliases); refused"
                )
            continue
        stack.append((n, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in memo)
    return memo[id(node)]


def check_text(value: Any, key: str) -> None:
    """No NUL byte in any string of the policy: it cannot be stored in a SQL text literal (and
    PostgreSQL refuses it), so a label with one would silently differ from what was written."""
    stack: list[tuple[Any, str]] = [(value, key)]
    while stack:
        v, k = stack.pop()
        if isinstance(v, str) and "\x00" in v:
            raise PolicyError(f"policy key {k!r}: contains a NUL byte (\\x00)")
        if isinstance(v, dict):
            for kk, vv in v.items():
                if isinstance(kk, str) and "\x00" in kk:
                    raise PolicyError(f"policy key {k!r}: a key contains a NUL byte (\\x00)")
                stack.append((vv, f"{k}.{kk}" if k else str(kk)))
        elif isinstance(v, list):
            stack.extend((x, f"{k}[{i}]") for i, x in enumerate(v))


def _check_depth(text: str, what: str) -> None:
    """Refuse nesting deeper than :data:`MAX_YAML_DEPTH` from libyaml's event stream (flat, not
    recursive): libyaml's composer recurses in C, and 200,000 levels crash the process."""
    depth = 0
    for ev in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise PolicyError(f"{what}: nested more than {MAX_YAML_DEPTH} levels deep")
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


def compose_check_construct(text: str, shown: str) -> Any:
    """``yaml.load`` in its two halves with the size check between them: the text is parsed once
    (parsing is the slow part), and nothing is constructed from a node graph that is too big."""
    if _FastLoader is not None:
        _check_depth(text, shown)
        loader = _FastLoader(text)
    else:
        loader = _UniqueKeyLoader(text)  # the reader refuses unprintable characters (a YAMLError)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, shown)
        return loader.construct_document(node)
    finally:
        loader.dispose()
