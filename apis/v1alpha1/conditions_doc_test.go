package v1alpha1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Every condition type, reason and Event reason of the API is documented where users read
// them: a new one without a line in docs/conditions.md fails here.
func TestEveryConditionAndReasonIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/conditions.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "conditions.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s is not a string literal", name.Name)
					continue
				}
				value, _ := strconv.Unquote(lit.Value)
				seen++
				if !strings.Contains(string(doc), "`"+value+"`") {
					t.Errorf("%s (%q) is not in docs/conditions.md", name.Name, value)
				}
			}
		}
	}
	if seen < 50 {
		t.Errorf("read %d constants from conditions.go", seen)
	}
}
