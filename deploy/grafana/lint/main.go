// Command lint checks a Grafana dashboard of hookline's: that it is JSON, that it decodes
// strictly into the dashboard types of the Grafana Foundation SDK (generated from Grafana's
// own schema: an unknown, mistyped or missing field fails, panel options and Prometheus
// queries included), and the conventions of a dashboard meant for import: a `datasource`
// variable of Prometheus data sources that every panel and query uses, a non-empty query in
// every target, unique panel ids, panels within the 24-column grid.
//
//	go run . ../hookline-dashboard.json
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

const datasourceRef = "${datasource}"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: lint DASHBOARD.json")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "lint: %v\n", err)
		os.Exit(2)
	}
	problems := lint(raw)
	for _, problem := range problems {
		fmt.Fprintf(os.Stderr, "%s: %s\n", os.Args[1], problem)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Printf("%s: valid dashboard\n", os.Args[1])
}

// lint returns what is wrong with the dashboard `raw`; nothing when it is fine.
func lint(raw []byte) []string {
	if !json.Valid(raw) {
		return []string{"not valid JSON"}
	}
	plugins.RegisterDefaultPlugins()
	var board dashboard.Dashboard
	if err := failed(board.UnmarshalJSONStrict(raw)); err != nil {
		return []string{fmt.Sprintf("does not match the dashboard schema: %v", err)}
	}
	var problems []string
	if err := failed(board.Validate()); err != nil {
		problems = append(problems, fmt.Sprintf("does not match the dashboard schema: %v", err))
	}
	// The conventions are read from the JSON itself: the SDK (v0.0.22) reports every schema
	// error, but a panel it decoded without one comes back empty (its decoders return an
	// empty error list as a non-nil error, and the panel is dropped).
	var plain plainDashboard
	if err := json.Unmarshal(raw, &plain); err != nil {
		return append(problems, fmt.Sprintf("unexpected shape: %v", err))
	}
	if plain.Uid == "" {
		problems = append(problems, "no uid: an import would get a new one each time")
	}
	problems = append(problems, checkVariables(plain.Templating.List)...)
	ids := map[int]bool{}
	for _, panel := range plain.Panels {
		if panel.Type == "row" {
			if panel.Datasource != nil && panel.Datasource.Uid != datasourceRef {
				problems = append(problems, fmt.Sprintf("row %q: datasource is not %s", panel.Title, datasourceRef))
			}
			for _, inner := range panel.Panels {
				problems = append(problems, checkPanel(inner, ids)...)
			}
			continue
		}
		problems = append(problems, checkPanel(panel, ids)...)
	}
	return problems
}

type plainDashboard struct {
	Uid        string `json:"uid"`
	Templating struct {
		List []plainVariable `json:"list"`
	} `json:"templating"`
	Panels []plainPanel `json:"panels"`
}

type plainVariable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query any    `json:"query"`
}

type plainRef struct {
	Type string `json:"type"`
	Uid  string `json:"uid"`
}

type plainPanel struct {
	Type       string    `json:"type"`
	Id         *int      `json:"id"`
	Title      string    `json:"title"`
	Datasource *plainRef `json:"datasource"`
	GridPos    *struct {
		X int `json:"x"`
		W int `json:"w"`
	} `json:"gridPos"`
	Targets []struct {
		Datasource *plainRef `json:"datasource"`
		Expr       string    `json:"expr"`
	} `json:"targets"`
	Panels []plainPanel `json:"panels"`
}

func checkVariables(variables []plainVariable) []string {
	for _, variable := range variables {
		if variable.Name != "datasource" {
			continue
		}
		if variable.Type != string(dashboard.VariableTypeDatasource) {
			return []string{fmt.Sprintf("variable datasource is of type %q, not datasource", variable.Type)}
		}
		if variable.Query != "prometheus" {
			return []string{"variable datasource does not list Prometheus data sources (query: prometheus)"}
		}
		return nil
	}
	return []string{"no datasource template variable: the dashboard would be bound to one data source"}
}

func checkPanel(panel plainPanel, ids map[int]bool) []string {
	name := fmt.Sprintf("panel %q", panel.Title)
	var problems []string
	if panel.Title == "" {
		problems = append(problems, "a panel without a title")
	}
	if panel.Id == nil {
		problems = append(problems, name+": no id")
	} else if ids[*panel.Id] {
		problems = append(problems, fmt.Sprintf("%s: id %d used twice", name, *panel.Id))
	} else {
		ids[*panel.Id] = true
	}
	if panel.GridPos == nil || panel.GridPos.X < 0 || panel.GridPos.X+panel.GridPos.W > 24 {
		problems = append(problems, name+": outside the 24-column grid")
	}
	if !usesVariable(panel.Datasource) {
		problems = append(problems, fmt.Sprintf("%s: datasource is not %s", name, datasourceRef))
	}
	if len(panel.Targets) == 0 {
		problems = append(problems, name+": no query")
	}
	for i, target := range panel.Targets {
		if target.Expr == "" {
			problems = append(problems, fmt.Sprintf("%s, target %d: empty expr", name, i))
		}
		if !usesVariable(target.Datasource) {
			problems = append(problems, fmt.Sprintf("%s, target %d: datasource is not %s", name, i, datasourceRef))
		}
	}
	return problems
}

// failed is err, or nil for the SDK's empty list of errors (a nil cog.BuildErrors that its
// functions return as a non-nil error).
func failed(err error) error {
	if errs, ok := err.(cog.BuildErrors); ok && len(errs) == 0 {
		return nil
	}
	return err
}

func usesVariable(ref *plainRef) bool {
	return ref != nil && ref.Type == "prometheus" && ref.Uid == datasourceRef
}
