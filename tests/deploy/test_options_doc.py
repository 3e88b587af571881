"""Every daemon option is documented once: deploy/README.md's option tables are generated from
the binaries' own definitions (--print-config-keys) and must match them, and the example
configs name only keys that exist, commented-out ones included.

Regenerate the tables after changing a flag:  python3 tests/deploy/test_options_doc.py --update
"""
import os
import re
import sys

from deploy_util import BIN, DAEMONS, DEPLOY, run

README = os.path.join(DEPLOY, "README.md")


def table(binary):
    r = run([os.path.join(BIN, binary), "--print-config-keys"])
    assert r.returncode == 0, r.stderr
    return r.stdout


def section(binary):
    return (f"<!-- BEGIN OPTIONS {binary} (generated: tests/deploy/test_options_doc.py --update) -->\n",
            f"<!-- END OPTIONS {binary} -->\n")


def documented(text, binary):
    begin, end = section(binary)
    assert begin in text and end in text, f"deploy/README.md lacks the {binary} options table"
    return text.split(begin, 1)[1].split(end, 1)[0]


def keys(binary):
    return {line.split("`")[1] for line in table(binary).splitlines()[2:]}


def test_readme_tables_match_the_binaries():
    with open(README) as f:
        text = f.read()
    for binary in DAEMONS:
        assert documented(text, binary) == table(binary), (
            f"deploy/README.md's {binary} table is stale: run "
            "python3 tests/deploy/test_options_doc.py --update")


def test_example_configs_name_only_real_keys():
    for name, binary in (("coordinator.yaml", "convoy-coordinator"), ("worker.yaml", "convoy-worker")):
        known = keys(binary)
        with open(os.path.join(DEPLOY, "config", name)) as f:
            for n, line in enumerate(f, 1):
                m = re.match(r"^#?([a-z][a-z0-9_-]*):(\s|$)", line)
                if m:
                    assert m.group(1).replace("-", "_") in known, f"{name}:{n}: '{m.group(1)}' is not a key"


def test_unknown_key_is_refused_with_its_line(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("listen: 127.0.0.1:7070\n# comment\nlisten_adress: x\n")
    r = run([os.path.join(BIN, "convoy-coordinator"), "--config", str(cfg), "--check-config"])
    assert r.returncode != 0
    assert "line 3: unknown key 'listen_adress'" in r.stdout + r.stderr


def test_version_on_every_binary():
    for b in ("convoy", "convoy-coordinator", "convoy-worker", "convoy-trainer"):
        path = os.path.join(BIN, b)
        if not os.path.exists(path):
            continue  # convoy-trainer needs LibTorch
        r = run([path, "--version"])
        assert r.returncode == 0, r.stderr
        assert re.match(rf"^{b} \d+\.\d+\.\d+ \(git ([0-9a-f]+|unknown)\)$", r.stdout.strip()), r.stdout


def update():
    with open(README) as f:
        text = f.read()
    for binary in DAEMONS:
        begin, end = section(binary)
        old = documented(text, binary)
        text = text.replace(begin + old + end, begin + table(binary) + end)
    with open(README, "w") as f:
        f.write(text)


if __name__ == "__main__" and "--update" in sys.argv:
    update()
