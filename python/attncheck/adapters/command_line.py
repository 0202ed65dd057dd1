"""The command line the file-and-worker adapters share (hf_transformers, torch_sdpa, torch_flex):
GOLDEN... with -o CANDIDATE or --output-dir DIR, or --worker (attncheck's worker protocol on stdin/stdout).
Imports nothing heavy: an adapter's --help needs neither torch nor a framework."""
import argparse
import os


def golden_parser(prog, description):
    """An ArgumentParser with the shared targets; each adapter adds its own options."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("goldens", nargs="*", metavar="GOLDEN")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--worker", action="store_true",
                        help="serve attncheck's worker protocol on stdin/stdout (attncheck fuzz --impl exec:...)")
    target.add_argument("-o", "--output", help="candidate file (one golden)")
    target.add_argument("--output-dir", help="folder for <golden name>.candidate.h5 (any number of goldens)")
    return parser


def check_targets(parser, arguments):
    """Refuses (exit 2, through parser.error) a command line whose goldens and targets do not fit together."""
    if arguments.worker:
        if arguments.goldens:
            parser.error("--worker reads its cases from stdin; give no GOLDEN")
        return
    if not arguments.goldens or not (arguments.output or arguments.output_dir):
        parser.error("give GOLDEN... with -o CANDIDATE or --output-dir DIR (or --worker)")
    if arguments.output and len(arguments.goldens) != 1:
        parser.error("-o names one candidate; use --output-dir for several goldens")


def candidate_path(arguments, golden):
    """-o's file, or DIR/<golden name>.candidate.h5 (DIR made when missing)."""
    if arguments.output:
        return arguments.output
    os.makedirs(arguments.output_dir, exist_ok=True)
    return os.path.join(arguments.output_dir, os.path.basename(golden).removesuffix(".h5") + ".candidate.h5")
