#!/usr/bin/env python3
"""Vendors etcd v3's gRPC API (.proto files) for a C++ build: copies them from Debian's
golang-etcd-server-dev (3.4.23) and strips what a C++ build lacks and does not need:
gogoproto (Go code-generation options) and google.api.http (grpc-gateway) annotations. The
messages, fields, numbers and services are unchanged, so the wire format is etcd's.

    apt-get download golang-etcd-server-dev && dpkg-deb -x golang-etcd-server-dev_*.deb x
    python3 proto/etcd/strip.py x/usr/share/gocode/src/go.etcd.io/etcd proto/etcd
"""
import re
import sys
from pathlib import Path

FILES = {
    "mvcc/mvccpb/kv.proto": "etcd/mvcc/mvccpb/kv.proto",
    "auth/authpb/auth.proto": "etcd/auth/authpb/auth.proto",
    "etcdserver/etcdserverpb/rpc.proto": "etcd/etcdserver/etcdserverpb/rpc.proto",
}


def strip(text):
    text = re.sub(r'^import "(gogoproto/gogo|google/api/annotations)\.proto";\n', "", text,
                  flags=re.M)
    text = re.sub(r"^option \(gogoproto\.[a-z_]+\) = [a-z]+;\n", "", text, flags=re.M)
    # option (google.api.http) = { ... };  (braces may nest: additional_bindings)
    while True:
        start = text.find("option (google.api.http) = {")
        if start < 0:
            break
        depth, i = 0, text.index("{", start)
        while True:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        end = text.index(";", i) + 1
        line_start = text.rfind("\n", 0, start) + 1
        text = text[:line_start] + text[end:].lstrip(" ").removeprefix("\n")
    text = re.sub(r"\{\s*\}", "{}", text)
    # Field options: [(gogoproto.nullable) = false, ...]
    text = re.sub(r"\s*\[\(gogoproto\.[^\]]*\]", "", text)
    return text


def main():
    src, dest = Path(sys.argv[1]), Path(sys.argv[2])
    for rel, out in FILES.items():
        text = strip((src / rel).read_text())
        if "gogoproto" in text or "google.api" in text:
            sys.exit(f"{rel}: annotations left after stripping")
        path = dest / out
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// Vendored from etcd 3.4.23 (Apache-2.0, proto/etcd/LICENSE) by "
                        "proto/etcd/strip.py:\n// gogoproto and google.api annotations removed; "
                        "the API is unchanged.\n" + text)


if __name__ == "__main__":
    main()
