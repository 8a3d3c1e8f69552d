"""The Helm chart's PrometheusRule is the shipped rules file: rendered with Helm's own engine
(the PyPI package helm-python-sdk, Helm v4 as a library; no cluster, no helm binary), its
spec equals deploy/prometheus/hookline-rules.yml but for the SLO objective it is given and
the alert labels it adds, and promtool accepts it as a rules file."""

import pathlib
import subprocess

import helm_python
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "hookline"
RULES = ROOT / "deploy" / "prometheus" / "hookline-rules.yml"
OBJECTIVE = "hookline:delivery_slo_objective:ratio"


def render(values):
    chart = helm_python.Chart.load(str(CHART))
    try:
        return chart.render(values, name="hooks", namespace="payments")
    finally:
        chart.close()


def prometheus_rule(values):
    rendered = render(values)
    return yaml.safe_load(rendered["hookline/templates/prometheusrule.yaml"])


def shipped():
    return yaml.safe_load(RULES.read_text())


def rules(doc):
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_off_by_default():
    rendered = render({})
    assert not rendered.get("hookline/templates/prometheusrule.yaml", "").strip()


def test_the_rule_is_the_shipped_file():
    rule = prometheus_rule({"prometheusRule": {"enabled": True}})
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["name"] == "hooks-hookline"
    assert rule["spec"] == shipped()


def test_objective_and_alert_labels_are_applied(tmp_path):
    rule = prometheus_rule(
        {
            "prometheusRule": {
                "enabled": True,
                "sloObjective": "0.995",
                "alertLabels": {"team": "payments", "severity": "ignored"},
                "labels": {"release": "kube-prometheus-stack"},
            }
        }
    )
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    got, want = rules(rule["spec"]), rules(shipped())
    assert len(got) == len(want)
    for mine, theirs in zip(got, want):
        if mine.get("record") == OBJECTIVE:
            assert mine["expr"] == "vector(0.995)"
            assert theirs["expr"] == "vector(0.999)"
        elif "alert" in mine:
            assert mine["labels"] == {**theirs["labels"], "team": "payments"}, mine["alert"]
            assert {k: v for k, v in mine.items() if k != "labels"} == {
                k: v for k, v in theirs.items() if k != "labels"
            }
        else:
            assert mine == theirs
    # What the operator hands Prometheus is a valid rules file.
    path = tmp_path / "rendered-rules.yml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    checked = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("objective", ["99.9", "1", "0", "abc", "0.999; drop"])
def test_an_objective_that_is_not_a_fraction_is_refused(objective):
    with pytest.raises(helm_python.HelmRenderError, match="prometheusRule.sloObjective"):
        render({"prometheusRule": {"enabled": True, "sloObjective": objective}})
