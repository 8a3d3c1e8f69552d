package main

import (
	"os"
	"strings"
	"testing"
)

func shipped(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../hookline-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestTheShippedDashboardPasses(t *testing.T) {
	if problems := lint([]byte(shipped(t))); len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
}

func TestEachBreakageIsFound(t *testing.T) {
	cases := []struct {
		name, from, to, want string
	}{
		{"not JSON", `"panels": [`, `"panels": [[`, "not valid JSON"},
		{"a field the schema does not know", `"title": "Deliveries/s by outcome",`,
			`"title": "Deliveries/s by outcome", "colour": "red",`, "colour"},
		{"a mistyped field", `"graphTooltip": 1`, `"graphTooltip": "shared"`, "graphTooltip"},
		{"a panel option the timeseries panel does not have", `"displayMode": "list"`,
			`"displayMode": "list", "wrap": true`, "wrap"},
		{"a query bound to one data source", `"uid": "${datasource}"
          },
          "refId": "A",
          "expr": "sum by (status)`, `"uid": "P1809F7CD0C75ACF3"
          },
          "refId": "A",
          "expr": "sum by (status)`, "target 0: datasource is not ${datasource}"},
		{"a query field Prometheus queries do not have", `"legendFormat": "{{status}}",`,
			`"legendFormat": "{{status}}", "exprr": "up",`, "exprr"},
		{"a panel without a query", `"expr": "sum by (outcome) (rate(webhook_attempts_total{job=~\"$job\"}[$__rate_interval]))",`,
			`"expr": "",`, "target 0: empty expr"},
		{"no datasource variable", `"name": "datasource"`, `"name": "source"`, "no datasource template variable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			board := shipped(t)
			if !strings.Contains(board, c.from) {
				t.Fatalf("the dashboard no longer has %q", c.from)
			}
			problems := lint([]byte(strings.Replace(board, c.from, c.to, 1)))
			if !strings.Contains(strings.Join(problems, "\n"), c.want) {
				t.Fatalf("want a problem naming %q, got %v", c.want, problems)
			}
		})
	}
}
