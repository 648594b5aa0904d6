# Runs INSIDE the target interpreter (Python 3.8+), stdlib only at module level. Loads vLLM's
# general plugins the way vLLM does and prints, as one JSON doc, the "module:Class" that
# vLLM's ModelRegistry resolves each wanted architecture to ("resolved"), and, where that is
# the adapter's own class, why vLLM could not instantiate it ("interface": arch -> problems).
# argv[1]: the VLLM_PLUGINS filter to set ("": leave the environment's), argv[2]: JSON object,
# architecture -> the adapter's "module:Class".
#
# _describe() is also copied, as source, into the register() module of every plugin that
# ascendpatch writes (kinds/plugin.py): the plugin and this probe must name an entry the same
# way. Its text is part of files already installed on targets, so it has no annotations (an
# edit would make every installed plugin differ from what ascendpatch would write now).
import importlib
import inspect
import json
import os
import sys
from typing import Any, List, Optional  # noqa: F401  (in type comments)


def _describe(entry):
    """'module:Class' of a ModelRegistry entry (lazy or imported)."""
    if getattr(entry, "module_name", None):
        return "%s:%s" % (entry.module_name, entry.class_name)
    cls = getattr(entry, "model_cls", None)
    if cls is not None:
        return "%s:%s" % (cls.__module__, cls.__qualname__)
    return str(entry)


def _load(entry):
    # type: (object) -> object
    """The class vLLM would instantiate for a registry entry, imported as vLLM imports it."""
    load = getattr(entry, "load_model_cls", None)
    if load is not None:
        return load()
    cls = getattr(entry, "model_cls", None)
    if cls is not None:
        return cls
    module, _, name = str(entry).partition(":")
    return getattr(importlib.import_module(module), name)


def _signature_problem(cls):
    # type: (Any) -> Optional[str]
    """vLLM's initialize_model (vllm/model_executor/model_loader/utils.py) passes
    ``vllm_config`` and ``prefix`` only when ``__init__`` names both; any other class is an
    "old-style model class" it calls with guessed arguments (config, cache_config, ...: never
    vllm_config), so an ``__init__(*args, **kwargs)`` that hands them on to vLLM's own model
    fails in the Worker ("missing ... 'vllm_config'")."""
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return "vLLM cannot read the signature of its __init__"
    missing = [n for n in ("vllm_config", "prefix") if n not in signature.parameters]
    if not missing:
        return None
    return ("its __init__%s does not name %s: vLLM's initialize_model then takes it for an "
            "old-style model class and calls it without vllm_config (\"Trying to guess the "
            "arguments for old-style model class\"), which kills the Worker; declare "
            "__init__(self, *, vllm_config, prefix=\"\")" % (signature, " and ".join(missing)))


def _kind_problem(cls):
    # type: (Any) -> Optional[str]
    """vLLM's own interface predicates (model_executor/models/interfaces_base.py), as its
    registry applies them to every model class: one that is neither a text generation nor a
    pooling model does not serve ("This model does not support `--runner generate`")."""
    try:
        from vllm.model_executor.models import interfaces_base
    except ImportError:  # a vLLM without them: only the signature rule applies
        return None
    tests = [getattr(interfaces_base, n) for n in ("is_text_generation_model", "is_pooling_model")
             if hasattr(interfaces_base, n)]
    if not tests or any(t(cls) for t in tests):
        return None
    return ("vLLM's is_text_generation_model and is_pooling_model both reject it (a model "
            "class needs embed_input_ids, forward(input_ids, positions) and compute_logits, or "
            "a pooler)")


def _interface(entry):
    # type: (object) -> List[str]
    """Why vLLM could not instantiate the class of ``entry`` as a model (empty: it can)."""
    try:
        cls = _load(entry)
    except BaseException as exc:
        return ["importing it fails: %s: %s" % (type(exc).__name__, exc)]
    if not isinstance(cls, type):
        return ["it is not a class"]
    found = [_signature_problem(cls), _kind_problem(cls)]
    return [p for p in found if p]


def main():
    # type: () -> None
    if sys.argv[1]:
        os.environ["VLLM_PLUGINS"] = sys.argv[1]
    wanted = json.loads(sys.argv[2])
    try:
        from vllm.plugins import load_general_plugins

        load_general_plugins()
        from vllm import ModelRegistry

        models = getattr(ModelRegistry, "models", None)
        if not isinstance(models, dict):
            models = {a: "(unknown class)" for a in ModelRegistry.get_supported_archs()}
        resolved = {a: _describe(models[a]) for a in wanted if a in models}
        interface = {a: _interface(models[a]) for a, target in wanted.items()
                     if resolved.get(a) == target}
        print(json.dumps({"resolved": resolved, "interface": interface}))
    except BaseException as exc:
        print(json.dumps({"error": "%s: %s" % (type(exc).__name__, exc)}))


if __name__ == "__main__":
    main()
