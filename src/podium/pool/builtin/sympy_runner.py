"""Runs inside the sandbox as main.py: one symbolic-math request from request.json, the answer as JSON.

Parsing uses sympy's parse_expr, which evaluates its input; that is why this runs sandboxed.
"""

import json

import sympy
from sympy.parsing.sympy_parser import (
    convert_xor,
    implicit_multiplication_application,
    parse_expr,
    standard_transformations,
)

TRANSFORMATIONS = (*standard_transformations, implicit_multiplication_application, convert_xor)


def parse(text):
    if ";" in text:
        return tuple(parse(part) for part in text.split(";") if part.strip())
    if text.count("=") == 1 and not any(op in text for op in ("==", "<=", ">=", "!=")):
        left, right = text.split("=")
        return sympy.Eq(parse(left), parse(right))
    return parse_expr(text, transformations=TRANSFORMATIONS)


def symbols_of(names, expression):
    if names:
        return [sympy.Symbol(name) for name in names]
    return sorted(expression.free_symbols, key=lambda symbol: symbol.name)


def run(request):
    operation = request["operation"]
    expression = parse(request["expression"])
    names = request.get("variables") or []
    if operation == "simplify":
        return sympy.simplify(expression)
    if operation == "expand":
        return sympy.expand(expression)
    if operation == "factor":
        return sympy.factor(expression)
    if operation == "solve":
        equations = list(expression) if isinstance(expression, tuple) else [expression]
        unknowns = names or sorted(set().union(*(e.free_symbols for e in equations)), key=lambda s: s.name)
        return sympy.solve(equations, [sympy.Symbol(str(u)) for u in unknowns], dict=True)
    if operation == "diff":
        return sympy.diff(expression, *symbols_of(names, expression))
    if operation == "integrate":
        return sympy.integrate(expression, *symbols_of(names, expression))
    if operation == "evaluate":
        substitutions = {sympy.Symbol(k): parse(str(v)) for k, v in (request.get("substitutions") or {}).items()}
        return sympy.N(expression.subs(substitutions), request.get("digits") or 15)
    raise ValueError(f"unknown operation {operation!r}")


def to_json(result):
    if isinstance(result, list):
        return [to_json(item) for item in result]
    if isinstance(result, dict):
        return {str(key): to_json(value) for key, value in result.items()}
    return str(result)


with open("request.json", encoding="utf-8") as handle:
    # The last line is the answer: anything the expression itself printed comes before it.
    print("\n" + json.dumps({"result": to_json(run(json.load(handle)))}))
