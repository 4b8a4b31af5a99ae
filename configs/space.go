package configs

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Scales a range parameter can be sampled on.
const (
	ScaleLinear = "linear" // min, min+step, ..., max
	ScaleLog    = "log"    // points values spaced evenly in log(value)
	ScalePow2   = "pow2"   // the powers of two in [min, max]
)

// ParamSpec declares one tuned parameter by its TF Serving name: a list of
// values, a range with a scale, or (for a derived parameter such as
// allowed_batch_sizes) a list of named choices. It is plain data as written
// in a study; search.NewSpace turns a SpaceSpec into a searchable space and
// checks the values against the parameter's meaning.
//
// With values, scale is optional and names the metric the search models the
// parameter on (linear or log); left empty, the search uses a log metric
// when the values span a factor of 8 or more.
type ParamSpec struct {
	Name    string   `yaml:"-" json:"name"`
	Values  []int64  `yaml:"values,omitempty" json:"values,omitempty"`
	Choices []string `yaml:"choices,omitempty" json:"choices,omitempty"` // derived parameters only
	Min     *int64   `yaml:"min,omitempty" json:"min,omitempty"`
	Max     *int64   `yaml:"max,omitempty" json:"max,omitempty"`
	Scale   string   `yaml:"scale,omitempty" json:"scale,omitempty"`
	Step    int64    `yaml:"step,omitempty" json:"step,omitempty"`     // linear only; default 1
	Points  int      `yaml:"points,omitempty" json:"points,omitempty"` // log only
	// UpToCores drops the values above the machine's core count (0, TF's
	// "choose for me", stays): thread counts that suit any machine the
	// study runs on.
	UpToCores bool `yaml:"up_to_cores,omitempty" json:"up_to_cores,omitempty"`
}

// SpaceSpec is a study's space section: parameters in the order they were
// declared. In YAML it is a mapping from parameter name to its ParamSpec;
// the order of the mapping is kept (a Go map would lose it and break seeded
// reproducibility).
type SpaceSpec []ParamSpec

// UnmarshalYAML decodes the mapping in document order and rejects unknown
// keys inside each parameter.
func (s *SpaceSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: space must be a mapping from parameter name to {values: [...]} or {min, max, scale}", n.Line)
	}
	out := make(SpaceSpec, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		var p ParamSpec
		if err := decodeStrict(val, &p); err != nil {
			return fmt.Errorf("space.%s: %w", key.Value, err)
		}
		p.Name = key.Value
		out = append(out, p)
	}
	*s = out
	return nil
}

// MarshalYAML writes the mapping back in declared order.
func (s SpaceSpec) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, p := range s {
		var v yaml.Node
		if err := v.Encode(p); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: p.Name}, &v)
	}
	return n, nil
}

// decodeStrict decodes n into v and fails on keys v does not have.
func decodeStrict(n *yaml.Node, v any) error {
	// yaml.Node.Decode has no KnownFields switch; re-encode and use a
	// Decoder, which does.
	raw, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	return dec.Decode(v)
}
