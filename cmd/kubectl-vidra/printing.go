package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// none is what kubectl prints for a value that is not set.
const none = "<none>"

// outputFlags is -o: a table by default (and -o wide where a command has more columns),
// otherwise any of kubectl's object printers (yaml, json, name, jsonpath, go-template).
type outputFlags struct {
	print     *genericclioptions.PrintFlags
	allowWide bool
	// byDefault says what the command prints without -o, for --help.
	byDefault string
}

func newOutputFlags(allowWide bool, byDefault string) *outputFlags {
	return &outputFlags{print: genericclioptions.NewPrintFlags(""), allowWide: allowWide, byDefault: byDefault}
}

func (o *outputFlags) addFlags(cmd *cobra.Command) {
	o.print.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format, one of (%s). Default: %s.", strings.Join(o.allowedFormats(), ", "), o.byDefault)
}

func (o *outputFlags) format() string { return strings.ToLower(*o.print.OutputFormat) }

// table reports whether a table is asked for (no -o, or -o wide where allowed).
func (o *outputFlags) table() bool {
	return o.format() == "" || (o.allowWide && o.format() == "wide")
}

func (o *outputFlags) wide() bool { return o.allowWide && o.format() == "wide" }

// allowedFormats lists what -o accepts, for help and errors.
func (o *outputFlags) allowedFormats() []string {
	formats := o.print.AllowedFormats()
	if o.allowWide {
		formats = append([]string{"wide"}, formats...)
	}
	return formats
}

// objectPrinter returns the printer of -o.
func (o *outputFlags) objectPrinter() (printers.ResourcePrinter, error) {
	p, err := o.print.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("unknown output format %q: use one of %s", o.format(), strings.Join(o.allowedFormats(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("-o %s: %w", o.format(), err)
	}
	return p, nil
}

// validate fails on an -o the command cannot print; called before anything is read, so a
// typo fails at once.
func (o *outputFlags) validate() error {
	if o.table() {
		return nil
	}
	_, err := o.objectPrinter()
	return err
}

// printList prints objs as "kubectl get -o" prints a listing: a v1 List of them, however
// many there are, or one name per line for -o name.
func (o *outputFlags) printList(out io.Writer, scheme *runtime.Scheme, objs ...runtime.Object) error {
	p, err := o.objectPrinter()
	if err != nil {
		return err
	}
	items := make([]runtime.RawExtension, 0, len(objs))
	for _, obj := range objs {
		if err := setKind(obj, scheme); err != nil {
			return err
		}
		if o.format() == "name" {
			// kubectl's name printer takes no List: it is given the items one by one.
			if err := p.PrintObj(obj, out); err != nil {
				return err
			}
			continue
		}
		items = append(items, runtime.RawExtension{Object: obj})
	}
	if o.format() == "name" {
		return nil
	}
	return p.PrintObj(&corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: items}, out)
}

// printObject prints one object with the printer of -o.
func (o *outputFlags) printObject(out io.Writer, scheme *runtime.Scheme, obj runtime.Object) error {
	p, err := o.objectPrinter()
	if err != nil {
		return err
	}
	if err := setKind(obj, scheme); err != nil {
		return err
	}
	return p.PrintObj(obj, out)
}

// setKind gives obj its apiVersion and kind, which a typed client leaves empty on what it
// reads, and which a printed manifest needs.
func setKind(obj runtime.Object, scheme *runtime.Scheme) error {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return fmt.Errorf("print: %w", err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}

// writeTable writes rows under headers, aligned as kubectl aligns its tables.
func writeTable(out io.Writer, headers []string, rows [][]string) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, strings.Join(headers, "\t"))
	for _, row := range rows {
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// insertBefore returns row with extra inserted before its last column, so a free-text
// column (a reason, an error) stays last even in -o wide.
func insertBefore(row []string, extra ...string) []string {
	last := len(row) - 1
	return slices.Concat(row[:last], extra, row[last:])
}

// age is how long ago t was, as kubectl's AGE column shows it (12s, 3m, 5d).
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// orNone returns s, or <none> when it is empty.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// singleLine folds s onto one line, so a multi-line message keeps a table aligned.
func singleLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// truncate cuts s to at most limit characters, marking the cut with "...".
func truncate(s string, limit int) string {
	if r := []rune(s); len(r) > limit {
		return string(r[:limit-3]) + "..."
	}
	return s
}
