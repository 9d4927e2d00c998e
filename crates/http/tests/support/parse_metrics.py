"""Parses an OpenMetrics exposition (standard input) with prometheus_client's strict
OpenMetrics parser and prints every sample as JSON: [[name, {labels}, value], ...].

A malformed exposition (wrong order, missing # EOF, a histogram without +Inf, a counter
without _total, ...) makes the parser raise: the exit status is then non-zero and the
error is on standard error."""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

families = {}
samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    families[family.name] = family.type
    for s in family.samples:
        samples.append([s.name, s.labels, s.value])
json.dump({"families": families, "samples": samples}, sys.stdout)
