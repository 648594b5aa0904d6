# Runs INSIDE the target interpreter (Python 3.8+), stdlib only at module level. Loads vLLM's
# general plugins the way vLLM does and prints, as one JSON doc, the "module:Class" that
# vLLM's ModelRegistry resolves each wanted architecture to.
# argv[1]: the VLLM_PLUGINS filter to set ("": leave the environment's), argv[2]: JSON list of
# architectures.
#
# _describe() is also copied, as source, into the register() module of every plugin that
# ascendpatch writes (kinds/plugin.py): the plugin and this probe must name an entry the same
# way. Its text is part of files already installed on targets, so it has no annotations (an
# edit would make every installed plugin differ from what ascendpatch would write now).
import json
import os
import sys


def _describe(entry):
    """'module:Class' of a ModelRegistry entry (lazy or imported)."""
    if getattr(entry, "module_name", None):
        return "%s:%s" % (entry.module_name, entry.class_name)
    cls = getattr(entry, "model_cls", None)
    if cls is not None:
        return "%s:%s" % (cls.__module__, cls.__qualname__)
    return str(entry)


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
        print(json.dumps({"resolved": resolved}))
    except BaseException as exc:
        print(json.dumps({"error": "%s: %s" % (type(exc).__name__, exc)}))


if __name__ == "__main__":
    main()
