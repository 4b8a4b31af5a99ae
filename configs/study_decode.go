package configs

import (
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decoder decodes a study document node by node, so that every value keeps
// the line it was written on, every unknown key is reported (not only the
// first) and decoding goes on after a bad value. yaml.v3's own strict
// decoding stops at the first unknown key and loses lines for the rest.
type decoder struct {
	lines    map[string]int
	problems Problems
	// at holds the line of problems that are not about a written field
	// (syntax errors, a second document), by index in problems.
	at map[int]int
	// visits counts nodes decoded, aliases expanded, against maxVisits.
	visits int
}

// maxVisits bounds the nodes a study may expand to, so that nested
// aliases (the "billion laughs" document) cannot make decoding explode.
const maxVisits = 100000

var (
	spaceSpecType = reflect.TypeFor[SpaceSpec]()
	durationType  = reflect.TypeFor[Duration]()
)

// document decodes data over s, which holds the defaults.
func (d *decoder) document(data []byte, s *Study) {
	d.lines[""] = 1
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.add("", 1, "the study is empty: it needs at least name, target, load, slo and space")
			return
		}
		d.syntax(err)
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.add("", extra.Line, "a study file holds one YAML document; found a second one here")
		return
	} else if !errors.Is(err, io.EOF) {
		d.syntax(err)
		return
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		d.add("", root.Line, "the study is empty: it needs at least name, target, load, slo and space")
		return
	}
	d.value(root, reflect.ValueOf(s).Elem(), "")
}

// syntax records a YAML syntax error ("yaml: line 3: mapping values are
// not allowed in this context") at its line.
func (d *decoder) syntax(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line, msg = n, strings.TrimSpace(rest[i+1:])
			}
		}
	}
	d.add("", line, "YAML syntax: %s", msg)
}

// add records a problem at field. line is where it was found; the field's
// own line is looked up later, so line only matters for fields that are
// not recorded (a duplicate key, a syntax error).
func (d *decoder) add(field string, line int, format string, args ...any) {
	if _, ok := d.lines[field]; !ok && line > 0 && field != "" {
		d.lines[field] = line
	}
	if field == "" && line > 0 {
		if d.at == nil {
			d.at = map[int]int{}
		}
		d.at[len(d.problems)] = line
	}
	d.problems.Add(field, format, args...)
}

// value decodes n into v, which is addressable.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if !d.visit(n) {
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Tag == "!!null" && n.Kind == yaml.ScalarNode {
		switch v.Kind() {
		case reflect.Slice, reflect.Map:
			v.Set(reflect.Zero(v.Type())) // "flags:" or "flags: ~" is an empty list
			return
		case reflect.Struct:
			if v.Type() != durationType {
				return // "target:" keeps the section's defaults
			}
		}
		d.add(path, n.Line, "has no value; remove the key to use the default")
		return
	}
	switch {
	case v.Type() == spaceSpecType:
		d.space(n, v, path)
		return
	case v.Type() == durationType:
		d.duration(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.mapping(n, v, path)
	case reflect.Slice:
		d.sequence(n, v, path)
	case reflect.Map:
		d.dict(n, v, path)
	case reflect.Interface:
		d.free(n, v, path)
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		before := len(d.problems)
		d.value(n, elem.Elem(), path)
		if len(d.problems) == before {
			v.Set(elem)
		}
	default:
		d.scalar(n, v, path)
	}
}

// visit counts n against maxVisits and reports whether decoding may go on.
func (d *decoder) visit(n *yaml.Node) bool {
	d.visits++
	if d.visits == maxVisits+1 {
		d.add("", n.Line, "the study expands to more than %d values (aliases nested too deep?)", maxVisits)
	}
	return d.visits <= maxVisits
}

// fieldsOf maps yaml key names to field indexes of struct type t.
func fieldsOf(t reflect.Type) (map[string]int, []string) {
	idx := map[string]int{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		idx[name] = i
		names = append(names, name)
	}
	return idx, names
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.add(path, n.Line, "must be a mapping of keys to values, got %s", describe(n))
		return
	}
	idx, names := fieldsOf(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.add(path, k.Line, "keys must be plain names, got %s", describe(k))
			continue
		}
		field := join(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			d.lines[field] = k.Line
			d.problems.Add(field, "is given twice (first on line %d)", prev)
			continue
		}
		seen[k.Value] = k.Line
		j, ok := idx[k.Value]
		if !ok {
			d.lines[field] = k.Line
			d.problems.Add(field, "unknown key%s", suggest(k.Value, names))
			continue
		}
		d.lines[field] = k.Line
		d.value(val, v.Field(j), field)
	}
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.add(path, n.Line, "must be a list, got %s", describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		field := path + "[" + strconv.Itoa(i) + "]"
		d.lines[field] = item.Line
		d.value(item, out.Index(i), field)
	}
	v.Set(out)
}

// dict decodes a mapping with string keys (env, settings).
func (d *decoder) dict(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.add(path, n.Line, "must be a mapping, got %s", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		panic("configs: study maps must have string keys")
	}
	out := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.add(path, k.Line, "keys must be plain names, got %s", describe(k))
			continue
		}
		field := join(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			d.lines[field] = k.Line
			d.problems.Add(field, "is given twice (first on line %d)", prev)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[field] = k.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.value(val, elem, field)
		out.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
	}
	v.Set(out)
}

// free decodes a value of any shape (a strategy setting), recording the
// lines of nested keys so that a strategy's complaint can be located.
// Mappings decode to map[string]any so the study stays JSON-encodable.
func (d *decoder) free(n *yaml.Node, v reflect.Value, path string) {
	if !d.visit(n) {
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		mv := reflect.ValueOf(&m).Elem()
		d.dict(n, mv, path)
		v.Set(mv)
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, item := range n.Content {
			field := path + "[" + strconv.Itoa(i) + "]"
			d.lines[field] = item.Line
			d.free(item, reflect.ValueOf(&s[i]).Elem(), field)
		}
		v.Set(reflect.ValueOf(s))
	default:
		var x any
		if err := n.Decode(&x); err != nil {
			d.add(path, n.Line, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			return
		}
		if f, ok := x.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			d.add(path, n.Line, "must be a finite number, got %s", n.Value)
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	}
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	want := map[reflect.Kind]string{
		reflect.String: "a string",
		reflect.Bool:   "true or false",
		reflect.Int:    "an integer", reflect.Int64: "an integer",
		reflect.Float64: "a number",
	}[v.Kind()]
	if want == "" {
		panic("configs: study field of unsupported kind " + v.Kind().String())
	}
	if n.Kind != yaml.ScalarNode {
		d.add(path, n.Line, "must be %s, got %s", want, describe(n))
		return
	}
	switch v.Kind() {
	case reflect.String:
		// Quoted or not, a scalar is text here: "8500" and 8500 both
		// give "8500", as a user writing a tag or image expects.
		v.SetString(n.Value)
		return
	case reflect.Bool:
		if n.Tag != "!!bool" {
			d.add(path, n.Line, "must be true or false, got %s", describe(n))
			return
		}
	case reflect.Int, reflect.Int64:
		if n.Tag != "!!int" {
			d.add(path, n.Line, "must be an integer, got %s", describe(n))
			return
		}
	case reflect.Float64:
		if n.Tag != "!!int" && n.Tag != "!!float" {
			d.add(path, n.Line, "must be a number, got %s", describe(n))
			return
		}
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.add(path, n.Line, "must be %s, got %s", want, describe(n))
	}
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.add(path, n.Line, `must be a duration like "80ms", got %s`, describe(n))
		return
	}
	dur, err := ParseDuration(n.Value)
	if err != nil {
		d.add(path, n.Line, "%s", err.Error())
		return
	}
	v.Set(reflect.ValueOf(dur))
}

// space decodes the space section: a mapping from parameter name to its
// declaration, in document order, each declaration strict with lines.
func (d *decoder) space(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.add(path, n.Line, "must be a mapping from parameter name to {values: [...]} or {min, max, scale}, got %s", describe(n))
		return
	}
	out := make(SpaceSpec, 0, len(n.Content)/2)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			d.add(path, k.Line, "parameter names must be plain names, got %s", describe(k))
			continue
		}
		field := join(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			d.lines[field] = k.Line
			d.problems.Add(field, "is declared twice (first on line %d)", prev)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[field] = k.Line
		p := ParamSpec{Name: k.Value}
		d.value(val, reflect.ValueOf(&p).Elem(), field)
		p.Name = k.Value
		out = append(out, p)
	}
	v.Set(reflect.ValueOf(out))
}

// fieldByPath finds the struct field at a dotted path of yaml keys.
func fieldByPath(v reflect.Value, path string) (reflect.Value, bool) {
	for key := range strings.SplitSeq(path, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		idx, _ := fieldsOf(v.Type())
		i, ok := idx[key]
		if !ok {
			return reflect.Value{}, false
		}
		v = v.Field(i)
	}
	return v, true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe names a node's kind and value for a problem message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return strconv.Quote(n.Value)
		case "!!null":
			return "nothing"
		}
		return n.Value
	}
	return "a " + strings.TrimPrefix(n.ShortTag(), "!!")
}

// suggest proposes the known name closest to an unknown key, or lists the
// known names when none is close.
func suggest(key string, names []string) string {
	if c := closest(key, names); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return " (known keys: " + strings.Join(sorted, ", ") + ")"
}

// closest returns the name within two edits of key, or "".
func closest(key string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if dd := editDistance(key, n); dd < bestD {
			best, bestD = n, dd
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
