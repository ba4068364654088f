#!/usr/bin/env python3
# dbus-xml.py IFACE < INTROSPECTION-XML: print the <interface name="IFACE"> element of a
# D-Bus introspection document as a standalone introspection file, in a canonical form (one
# element a line, attributes in a fixed order, no comments), so that the files shipped in
# docs/dbus/ can be compared with what the live object says (test-dbus.sh) and regenerated
# from it.
import sys
import xml.etree.ElementTree as ET

HEADER = ('<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"\n'
          ' "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">\n')
ORDER = ("name", "type", "direction", "access", "value")


def attrs(e):
    keys = sorted(e.attrib, key=lambda k: (ORDER.index(k) if k in ORDER else 99, k))
    return "".join(' %s="%s"' % (k, e.attrib[k]) for k in keys)


def emit(e, depth, out):
    pad = "  " * depth
    kids = list(e)
    if not kids:
        out.append("%s<%s%s/>" % (pad, e.tag, attrs(e)))
        return
    out.append("%s<%s%s>" % (pad, e.tag, attrs(e)))
    for k in kids:
        emit(k, depth + 1, out)
    out.append("%s</%s>" % (pad, e.tag))


def main():
    iface = sys.argv[1]
    root = ET.fromstring(sys.stdin.read())
    for e in root.findall("interface"):
        if e.get("name") == iface:
            out = []
            emit(e, 1, out)
            sys.stdout.write(HEADER + "<node>\n" + "\n".join(out) + "\n</node>\n")
            return
    sys.exit("no interface %s in the introspection data" % iface)


main()
