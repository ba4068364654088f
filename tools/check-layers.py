#!/usr/bin/env python3
"""Fail when a source file includes a header of a layer above its own.

The layers, lowest first (docs/architecture.md):
  util/ < proto/ < policy/ < ops/ < graph/ < daemon/backend/ < daemon/exec/ < daemon/api/ < daemon/main.c
A file may include headers of its own layer and of the layers below it. client/ (libnpu,
npuctl) stands beside the daemon: it may include util/ and proto/ only. Tests and tools may
include anything. Usage: tools/check-layers.py [ROOT]
"""
import os
import re
import sys

LAYERS = ["util", "proto", "policy", "ops", "graph", "daemon/backend", "daemon/exec",
          "daemon/api", "daemon/main.c"]
CLIENT_MAY = {"util", "proto", "client"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    best = None
    for i, name in enumerate(LAYERS):
        if path == name or path.startswith(name + "/"):
            best = i  # the longest prefix wins (daemon/exec before daemon)
    return best


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = 0
    checked = 0
    for top in LAYERS[:5] + ["daemon", "client"]:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                if path.startswith("client/examples/"):
                    continue
                text = open(os.path.join(root, path), encoding="utf-8").read()
                for n, m in enumerate(INCLUDE.finditer(text)):
                    inc = m.group(1)
                    local = os.path.normpath(os.path.join(os.path.dirname(path), inc))
                    if os.path.exists(os.path.join(root, local)):
                        target = local
                    elif os.path.exists(os.path.join(root, inc)):
                        target = os.path.normpath(inc)
                    else:
                        continue  # system, generated (onnx.pb-c.h) or the public npu.h
                    checked += 1
                    line = text.count("\n", 0, m.start()) + 1
                    if path.startswith("client/"):
                        if target.split("/")[0] not in CLIENT_MAY:
                            print(f"{path}:{line}: client code includes daemon-side {target}")
                            bad += 1
                        continue
                    mine, theirs = layer_of(path), layer_of(target)
                    if mine is None or theirs is None:
                        continue
                    if theirs > mine:
                        print(f"{path}:{line}: {LAYERS[mine]} includes {target} "
                              f"from the layer above ({LAYERS[theirs]})")
                        bad += 1
    print(f"check-layers: {checked} includes checked, {bad} upward")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
