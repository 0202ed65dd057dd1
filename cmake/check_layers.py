#!/usr/bin/env python3
"""The layers of docs/ARCHITECTURE.md ("Layers"), checked: each folder's code includes only the folders it
may, so that impl/ stays free of the reference and golden files, the mutants stay out of properties/, and
bench/ stays off properties/.

    check_layers.py SOURCE_DIR       exit 1 naming every include that crosses a layer
    check_layers.py --self-test      a tree with a forbidden include must fail, a clean one pass

Tests (*_test.cpp, *_test_support.*, testing/ folders) are exempt: a test may use anything beneath it to
make its fixtures. Only quoted includes of the project's folders count ("folder/file.hpp"); "attncheck/"
is the generated plugin ABI tag (cmake/AttncheckImplementations.cmake)."""
import os
import re
import sys
import tempfile

# folder -> the folders its code may include (itself always)
ALLOWED = {
    "core": set(),
    "reference": {"core", "impl"},  # impl: its registration file only (reference_implementations.cpp)
    "golden": {"core"},
    "impl": {"core", "attncheck"},
    "mutants": {"core", "reference", "impl"},
    "exec_worker": {"core", "golden", "impl"},  # no reference: a worker's case costs attncheck no fp64 run
    "torch_impl": {"core", "reference", "impl"},
    "cuda_impl": {"core", "reference", "impl"},
    "properties": {"core", "reference", "golden", "impl", "mutants"},
    "bench": {"core", "reference", "mutants", "torch_impl", "cuda_impl"},
    "cli": {"core", "reference", "golden", "impl", "mutants", "properties"},
    "parser_fuzz": {"core", "golden"},
}
SOURCE_SUFFIXES = (".cpp", ".hpp", ".cu", ".cuh", ".h")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z_]+)/')


def is_test_file(relative_path: str) -> bool:
    name = os.path.basename(relative_path)
    parts = relative_path.split(os.sep)
    return name.endswith(("_test.cpp", "_test.cu")) or "_test_support" in name or "testing" in parts


def violations(source_dir: str) -> list:
    found = []
    for folder, allowed in ALLOWED.items():
        root = os.path.join(source_dir, folder)
        if not os.path.isdir(root):
            continue
        for directory, _, files in os.walk(root):
            for file_name in sorted(files):
                path = os.path.join(directory, file_name)
                relative = os.path.relpath(path, source_dir)
                if not file_name.endswith(SOURCE_SUFFIXES) or is_test_file(relative):
                    continue
                with open(path, encoding="utf-8", errors="replace") as source:
                    for number, line in enumerate(source, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target = match.group(1)
                        if target != folder and target in ALLOWED.keys() | {"attncheck"} and target not in allowed:
                            found.append(f"{relative}:{number}: {folder}/ includes {target}/ "
                                         f"(it may include: {', '.join(sorted(allowed | {folder}))})")
    return found


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tree:
        os.makedirs(os.path.join(tree, "impl"))
        os.makedirs(os.path.join(tree, "impl", "testing"))
        with open(os.path.join(tree, "impl", "registry.cpp"), "w") as f:
            f.write('#include "impl/registry.hpp"\n#include "core/model/case.hpp"\n')
        with open(os.path.join(tree, "impl", "testing", "helper.cpp"), "w") as f:
            f.write('#include "reference/reference.hpp"\n')  # tests are exempt
        if violations(tree):
            print("self-test FAILED: a clean tree was reported:", violations(tree))
            return 1
        with open(os.path.join(tree, "impl", "worker.cpp"), "w") as f:
            f.write('#include "impl/registry.hpp"\n  #include "golden/golden_file.hpp"\n')
        found = violations(tree)
        if len(found) != 1 or "impl/worker.cpp:2: impl/ includes golden/" not in found[0]:
            print("self-test FAILED: the forbidden include was not reported exactly once:", found)
            return 1
    print("self-test passed: a forbidden include is reported, a test file's is not")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = violations(sys.argv[1])
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} includes cross the layers of docs/ARCHITECTURE.md")
        return 1
    print(f"every include points down the layers ({len(ALLOWED)} folders checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
