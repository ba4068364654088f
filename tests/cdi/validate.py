#!/usr/bin/python3
"""Validate a JSON document against a JSON schema, with the keywords tests/cdi/cdi-schema.json
uses: type, required, properties, additionalProperties (false), items, minItems, enum, pattern,
minimum and $ref to #/definitions/NAME. No jsonschema module needed.
Usage: validate.py SCHEMA FILE... ; prints each error with its JSON path, exit 1 on any.
A CDI spec may be YAML; npuctl writes JSON, which is YAML too, so JSON is what this reads."""
import json
import re
import sys

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool,
         "number": (int, float), "integer": int}


def check(schema, value, path, root, errors):
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/definitions/"), ref
        schema = root["definitions"][ref[len("#/definitions/"):]]
    t = schema.get("type")
    if t:
        ok = isinstance(value, TYPES[t]) and not (t in ("integer", "number") and isinstance(value, bool))
        if not ok:
            errors.append("%s: expected %s, got %s" % (path, t, type(value).__name__))
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %r is not one of %r" % (path, value, schema["enum"]))
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append("%s: %r does not match %s" % (path, value, schema["pattern"]))
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        errors.append("%s: %r is below %r" % (path, value, schema["minimum"]))
    if isinstance(value, dict):
        for k in schema.get("required", []):
            if k not in value:
                errors.append("%s: required key '%s' is missing" % (path, k))
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                check(props[k], v, "%s.%s" % (path, k), root, errors)
            elif schema.get("additionalProperties") is False:
                errors.append("%s: unknown key '%s'" % (path, k))
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append("%s: at least %d item(s) needed" % (path, schema["minItems"]))
        if "items" in schema:
            for i, v in enumerate(value):
                check(schema["items"], v, "%s[%d]" % (path, i), root, errors)


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    bad = 0
    for name in sys.argv[2:]:
        errors = []
        try:
            with open(name) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            errors.append("$: cannot read: %s" % e)
        else:
            check(schema, doc, "$", schema, errors)
        for e in errors:
            print("%s: %s" % (name, e))
        bad |= bool(errors)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
