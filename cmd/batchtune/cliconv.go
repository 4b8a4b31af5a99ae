package main

import (
	"reflect"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// defaultInUsage finds a default written into a flag's usage text:
// "(default: the latest)" or "(default 8 when no --rate)".
var defaultInUsage = regexp.MustCompile(`\s*\(default:? ([^()]*(?:\([^()]*\)[^()]*)*)\)`)

// moveDefaultsToDefaultText sets DefaultText from a default written in a
// flag's usage and removes it there, so that help prints it once, not as
// "(default: the latest) (default: 0)".
func moveDefaultsToDefaultText(app *cli.App) {
	fix := func(flags []cli.Flag) {
		for _, f := range flags {
			v := reflect.ValueOf(f)
			if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
				continue
			}
			e := v.Elem()
			usage, dt := e.FieldByName("Usage"), e.FieldByName("DefaultText")
			if !usage.IsValid() || !dt.IsValid() || usage.Kind() != reflect.String || dt.Kind() != reflect.String || dt.String() != "" {
				continue
			}
			m := defaultInUsage.FindStringSubmatchIndex(usage.String())
			if m == nil {
				continue
			}
			u := usage.String()
			dt.SetString(u[m[2]:m[3]])
			usage.SetString(strings.TrimSpace(u[:m[0]] + u[m[1]:]))
		}
	}
	fix(app.Flags)
	for _, c := range app.Commands {
		fix(c.Flags)
	}
}
