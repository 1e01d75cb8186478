"""Public objects are named ``stableprompt.<Name>``, from their definition on.

Every public class and function is defined in a private module and re-exported by the door
(``stableprompt/__init__.py``). :func:`public`, called right after the definitions, sets
``__module__ = "stableprompt"`` (httpx's rewrite, done where the object is defined, so an
object the SDK creates internally, before anyone touched the door, is named the same way).
Pickles and reprs therefore refer to ``stableprompt.<Name>`` only, and private modules can
move without breaking them. Called after class creation, not as a class-body assignment:
pydantic and dataclasses resolve string annotations in ``sys.modules[cls.__module__]`` while
the class is being built.
"""

from __future__ import annotations

__all__ = ["PUBLIC_MODULE", "public"]

PUBLIC_MODULE = "stableprompt"
"""The module every public object names: the door, which resolves each name lazily."""

def public(*objects: object) -> None:
    """Set ``__module__`` of each class or function to :data:`PUBLIC_MODULE`."""
    for obj in objects:
        obj.__module__ = PUBLIC_MODULE
