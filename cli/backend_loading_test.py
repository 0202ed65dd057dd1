#!/usr/bin/env python3
"""ctest cli.starts_without_backends: backends are loaded only when used (impl/plugin_loader.hpp).

- The program itself needs no LibTorch or CUDA library (readelf: no such NEEDED entry).
- plan, golden make, golden inspect, golden run --impl reference and compare load none at run time
  (LD_DEBUG=files: the dynamic loader names every object it opens).
- With LibTorch built (TORCH=ON): golden check --impl torch-cpu-fp64 loads libattncheck_torch.so and
  LibTorch, and passes: the detection above is not vacuous. A plugin folder without the plugin, a file that
  is not a plugin, and a plugin built from other sources (STALE_PLUGIN_DIR) are each exit 2 naming the file.

    backend_loading_test.py ATTNCHECK TORCH(ON|OFF) STALE_PLUGIN_DIR"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

attncheck, torch_built, stale_plugin_dir = sys.argv[1], sys.argv[2] == "ON", sys.argv[3]
backend_library = re.compile(r"lib(torch|c10|cudart|cublas|cudnn|nccl|attncheck_torch|attncheck_cuda)\w*\.so")
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def run(*arguments, code, environment=None):
    """Runs attncheck under LD_DEBUG=files; returns (stdout + stderr without the loader's lines, loaded)."""
    env = dict(os.environ, LD_DEBUG="files", **(environment or {}))
    result = subprocess.run([attncheck, *arguments], capture_output=True, text=True, env=env)
    loader_lines = [line for line in result.stderr.splitlines() if re.match(r"^\s*\d+:", line)]
    other = "\n".join(line for line in result.stderr.splitlines() if not re.match(r"^\s*\d+:", line))
    loaded = sorted({match.group(0) for line in loader_lines for match in backend_library.finditer(line)})
    print(f"$ attncheck {' '.join(arguments)}  -> exit {result.returncode}, backend libraries: {loaded or 'none'}")
    print(result.stdout[-2000:] + other[-2000:])
    expect(result.returncode == code, f"`{' '.join(arguments)}` exited {result.returncode}, expected {code}")
    return result.stdout + other, loaded


needed = subprocess.run(["readelf", "-d", attncheck], capture_output=True, text=True, check=True).stdout
needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", needed)
print("NEEDED:", ", ".join(needed))
expect(needed, "readelf listed no NEEDED entry: the check below would be vacuous")
expect(not [name for name in needed if backend_library.search(name)],
       f"the program links a backend library directly: {needed}")

with tempfile.TemporaryDirectory() as scratch:
    folder = pathlib.Path(scratch)
    golden, candidate = str(folder / "small.h5"), str(folder / "candidate.h5")
    light = [
        ("plan", "--preset", "qwen3-0.6b"),
        ("golden", "make", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--seq", "5",
         "-o", golden),
        ("golden", "inspect", golden),
        ("golden", "run", golden, "--impl", "reference", "-o", candidate),
        ("compare", golden, candidate),
    ]
    for arguments in light:
        _, loaded = run(*arguments, code=0)
        expect(not loaded, f"`{' '.join(arguments)}` loaded backend libraries: {loaded}")

    if torch_built:
        output, loaded = run("golden", "check", golden, "--impl", "torch-cpu-fp64", code=0)
        expect("libattncheck_torch.so" in loaded and any(name.startswith("libtorch") for name in loaded),
               f"golden check --impl torch-cpu-fp64 did not load the torch plugin and LibTorch: {loaded}")

        empty = folder / "no-plugins"
        empty.mkdir()
        output, _ = run("golden", "check", golden, "--impl", "torch-cpu-fp64", code=2,
                        environment={"ATTNCHECK_PLUGIN_DIR": str(empty)})
        expect(f"{empty}/libattncheck_torch.so" in output and "ATTNCHECK_PLUGIN_DIR" in output,
               "a missing plugin is not reported by its path and ATTNCHECK_PLUGIN_DIR")

        # A shared object that is not a plugin: the C library's math library under the plugin's name.
        impostor = folder / "impostor"
        impostor.mkdir()
        libm = next(pathlib.Path(path) for path in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                                                     "/lib64/libm.so.6") if pathlib.Path(path).exists())
        shutil.copy(libm, impostor / "libattncheck_torch.so")
        output, _ = run("golden", "check", golden, "--impl", "torch-cpu-fp64", code=2,
                        environment={"ATTNCHECK_PLUGIN_DIR": str(impostor)})
        expect("must export attncheck_plugin_abi" in output, "a shared object without the entry points is not refused")

        output, _ = run("golden", "check", golden, "--impl", "torch-cpu-fp64", code=2,
                        environment={"ATTNCHECK_PLUGIN_DIR": stale_plugin_dir})
        expect("must be built from the same sources" in output and "stale-test-plugin" in output,
               "a plugin with another ABI tag is not refused by its tag")

        # Set but empty: refused by name, not taken as the current folder.
        output, _ = run("golden", "check", golden, "--impl", "torch-cpu-fp64", code=2,
                        environment={"ATTNCHECK_PLUGIN_DIR": ""})
        expect("ATTNCHECK_PLUGIN_DIR" in output and "must name a folder" in output,
               "an empty ATTNCHECK_PLUGIN_DIR is not refused by name")

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
