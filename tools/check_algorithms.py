#!/usr/bin/env python3
"""The table of algorithms in docs/algorithms.md against the registry.

usage: check_algorithms.py REGISTRY DOC [SRCDIR]

REGISTRY is what `weft_info --algorithms` prints (a header line, then one
tab-separated line per algorithm; "-" reads standard input); DOC is the
Markdown file whose table has the same header. Every registry row must be a
row of the table, in the same order, with the same cells (a cell written
entirely in `code` counts as its content); the table must have no other
row. With SRCDIR, every file a row names must exist there. Exit status 0
when they agree; 1, with a line per difference naming the table's line,
when they do not; 2 on bad usage.
"""
import os
import sys


def read_registry(path):
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    lines = [line for line in text.split("\n") if line != ""]
    if not lines:
        raise ValueError("%s: empty, expected the output of weft_info --algorithms" % path)
    header = lines[0].split("\t")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != len(header):
            raise ValueError("%s:%d: %d fields, expected %d" %
                             (path, number, len(cells), len(header)))
        rows.append(cells)
    return header, rows


def split_row(line):
    """The cells of a Markdown table line '| a | b |'."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    cells = []
    for cell in body.split("|"):
        cell = cell.strip()
        if len(cell) >= 2 and cell.startswith("`") and cell.endswith("`") and cell.count("`") == 2:
            cell = cell[1:-1]
        cells.append(cell)
    return cells


def read_table(path, header):
    """(line number, cells) of each row of the table under `header`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|") and split_row(line) == header:
            break
    else:
        raise ValueError("%s: no table with the header | %s |" % (path, " | ".join(header)))
    rows = []
    for number in range(i + 2, len(lines) + 1):
        line = lines[number - 1]
        if not line.lstrip().startswith("|"):
            break
        cells = split_row(line)
        if all(set(c) <= set("-: ") for c in cells):
            continue  # the separator line
        rows.append((number, cells))
    return rows


def compare(registry_path, doc, srcdir):
    header, reg = read_registry(registry_path)
    table = read_table(doc, header)
    errors = []
    name = lambda cells: "%s/%s" % (cells[0], cells[1])

    doc_rows = {}
    for number, cells in table:
        if len(cells) != len(header):
            errors.append("%s:%d: %d cells, expected %d" % (doc, number, len(cells), len(header)))
            continue
        if name(cells) in doc_rows:
            errors.append("%s:%d: %s is also on line %d" % (doc, number, name(cells),
                                                          doc_rows[name(cells)][0]))
            continue
        doc_rows[name(cells)] = (number, cells)
    reg_names = [name(cells) for cells in reg]
    end = table[-1][0] if table else 0

    for cells in reg:
        row = doc_rows.get(name(cells))
        if row is None:
            errors.append("%s:%d: registry row %s is missing from the table" % (doc, end,
                                                                                name(cells)))
            continue
        for column, want, have in zip(header, cells, row[1]):
            if want != have:
                errors.append("%s:%d: %s: %s is '%s' in the table, '%s' in the registry" %
                              (doc, row[0], name(cells), column, have, want))
    for key, (number, cells) in doc_rows.items():
        if key not in reg_names:
            errors.append("%s:%d: %s is not in the registry" % (doc, number, key))

    # the rows both have, in the registry's order
    in_doc = [key for key in doc_rows if key in reg_names]
    in_reg = [key for key in reg_names if key in doc_rows]
    for have, want in zip(in_doc, in_reg):
        if have != want:
            errors.append("%s:%d: %s comes before %s in the table, after it in the registry "
                          "(keep the registry's order)" % (doc, doc_rows[have][0], have, want))
            break

    if srcdir is not None:
        column = header.index("file") if "file" in header else None
        for cells in reg if column is not None else []:
            if not os.path.isfile(os.path.join(srcdir, cells[column])):
                errors.append("registry: %s names %s, which does not exist in %s" %
                              (name(cells), cells[column], srcdir))
    return errors, len(reg)


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write(__doc__)
        return 2
    try:
        errors, count = compare(argv[1], argv[2], argv[3] if len(argv) == 4 else None)
    except (OSError, ValueError) as e:
        print("check_algorithms: %s" % e)
        return 1
    for e in errors:
        print(e)
    if errors:
        print("%d difference(s) between %s and the registry (weft_info --algorithms)" %
              (len(errors), argv[2]))
        return 1
    print("%s agrees with the registry: %d algorithms" % (argv[2], count))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
