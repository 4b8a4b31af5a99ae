package configs

import (
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/batchtune/batchtune/objective"
)

// Strategies is what configs knows of the search strategies a study may
// name. Package search declares them (search/registry.go) and hands them
// over with UseStrategies from its init: search imports configs, so
// configs cannot ask it directly. Every program that reads studies links
// search in (the tuner does); a test of this package imports it from an
// external test file.
type Strategies interface {
	// Names lists the strategies in their declared order.
	Names() []string
	// Default is the strategy of a study that names none.
	Default() string
	// SettingsDoc lists each strategy's settings, for the reference study.
	SettingsDoc() string
}

var strategies atomic.Pointer[Strategies]

// UseStrategies makes s the strategies studies are checked against and
// documented with. Package search calls it from its init.
func UseStrategies(s Strategies) { strategies.Store(&s) }

// strategyNames lists the linked-in strategies; nil when none are.
func strategyNames() []string {
	if s := strategies.Load(); s != nil {
		return (*s).Names()
	}
	return nil
}

// defaultStrategy is the strategy of DefaultStudy; "" when search is not
// linked in (validation then says so).
func defaultStrategy() string {
	if s := strategies.Load(); s != nil {
		return (*s).Default()
	}
	return ""
}

// fieldDoc is the reference study's comment on field: fieldDocs', with the
// objectives (package objective) after objective's, the linked-in
// strategies' names after search.strategy's and their settings after
// search.settings'.
func fieldDoc(field string) string {
	doc := fieldDocs[field]
	if field == "objective" {
		return doc + "\n" + objective.Doc()
	}
	s := strategies.Load()
	switch {
	case s == nil:
	case field == "search.strategy":
		doc += " " + orList((*s).Names()) + "."
	case field == "search.settings":
		if d := (*s).SettingsDoc(); d != "" {
			doc += "\n" + d
		}
	}
	return doc
}

// orList writes names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// checkStrategy reports a search.strategy that no linked-in strategy has.
func checkStrategy(ps *Problems, name string) {
	names := strategyNames()
	if len(names) == 0 {
		ps.Add("search.strategy", "cannot be checked: no search strategies are linked in (import package search), got %s", strconv.Quote(name))
		return
	}
	for _, n := range names {
		if n == name {
			return
		}
	}
	ps.Add("search.strategy", "must be one of %s, got %q", strings.Join(names, ", "), name)
}
