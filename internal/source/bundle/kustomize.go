package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// krustyMu serialises kustomize builds: kustomize keeps its OpenAPI schema
// in process-wide state (kyaml/openapi) that each build resets, so two
// builds at once could see each other's schema. It is the one package
// variable here, guarding a library's global rather than holding ours.
var krustyMu sync.Mutex

// kustomizationIn returns the kustomization file in dir, or "".
func kustomizationIn(dir string) string {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && info.Mode().IsRegular() {
			return filepath.Join(dir, name)
		}
	}
	return ""
}

// buildKustomization runs kustomize on src.dir, after checking that no
// kustomization it reaches fetches anything, over a filesystem that sees
// only the source. Plugins stay disabled (krusty's default): no exec, no
// containers.
func buildKustomization(src *source, kfile string, b *budget) ([]byte, error) {
	if err := checkKustomizations(src, src.dir, map[string]bool{}); err != nil {
		return nil, err
	}
	fsys := &confinedFS{FileSystem: filesys.MakeFsOnDisk(), root: src.root, budget: b}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	opts.PluginConfig = types.DisabledPluginConfig()

	krustyMu.Lock()
	resources, err := krusty.MakeKustomizer(opts).Run(fsys, src.dir)
	krustyMu.Unlock()
	// A breach of the limits or of the root is reported as such, whatever
	// kustomize made of the read error.
	if fsys.err != nil {
		return nil, fsys.err
	}
	if err != nil {
		return nil, &KustomizeError{Kustomization: src.rel(kfile), Err: err}
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, &KustomizeError{Kustomization: src.rel(kfile), Err: err}
	}
	if len(out) == 0 {
		return nil, &EmptyError{Path: src.shown, Kustomization: src.rel(kfile)}
	}
	return out, nil
}

// checkKustomizations refuses, before anything is built, a kustomization
// in dir (or in a local base it reaches) that refers to something remote,
// that leaves the source, or that inflates Helm charts, since all of those
// fetch or read beyond what the source holds.
func checkKustomizations(src *source, dir string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	kfile := kustomizationIn(dir)
	if kfile == "" {
		return nil // a plain directory of resources
	}
	data, err := readWithin(src, kfile, "is a kustomization")
	if err != nil {
		return err
	}
	var k types.Kustomization
	if err := k.Unmarshal(data); err != nil {
		return &KustomizeError{Kustomization: src.rel(kfile), Err: err}
	}
	if len(k.HelmCharts) > 0 || len(k.HelmChartInflationGenerator) > 0 {
		return &RemoteBaseError{Kustomization: src.rel(kfile), Field: "helmCharts"}
	}
	for _, ref := range references(&k) {
		if isRemote(ref.value) {
			return &RemoteBaseError{Kustomization: src.rel(kfile), Field: ref.field, Ref: ref.value}
		}
		target := filepath.Join(dir, filepath.FromSlash(ref.value))
		if filepath.IsAbs(ref.value) || !within(src.root, target) {
			return &PathError{Path: ref.value, Reason: fmt.Sprintf("in %s (%s) is outside the source", src.rel(kfile), ref.field)}
		}
		real, err := filepath.EvalSymlinks(target)
		if errors.Is(err, os.ErrNotExist) {
			continue // kustomize will say what is missing
		}
		if err != nil {
			return fmt.Errorf("resolve %q in %s: %w", ref.value, src.rel(kfile), err)
		}
		if !within(src.root, real) {
			return &PathError{Path: ref.value, Reason: fmt.Sprintf("in %s (%s) leads outside the source through a symlink", src.rel(kfile), ref.field)}
		}
		if !ref.mayBeBase {
			continue
		}
		info, err := os.Stat(real)
		switch {
		case err != nil:
			continue // kustomize will say what is wrong
		case info.IsDir():
			err = checkKustomizations(src, real, seen)
		case ref.field != "resources" && ref.field != "bases" && ref.field != "components":
			// A generator, transformer or validator configured in a file of its own:
			// the builtin ones load the files it names.
			err = checkPluginConfig(src, real)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

type reference struct {
	field, value string
	// mayBeBase marks fields whose entries may be kustomization dirs.
	mayBeBase bool
}

// references lists every path a kustomization may load.
func references(k *types.Kustomization) []reference {
	var refs []reference
	add := func(field string, base bool, values ...string) {
		for _, v := range values {
			if v = strings.TrimSpace(v); v != "" {
				refs = append(refs, reference{field: field, value: v, mayBeBase: base})
			}
		}
	}
	add("resources", true, k.Resources...)
	add("bases", true, k.Bases...) //nolint:staticcheck // deprecated, yet kustomize still loads it
	add("components", true, k.Components...)
	add("generators", true, k.Generators...)
	add("transformers", true, k.Transformers...)
	add("validators", true, k.Validators...)
	add("crds", false, k.Crds...)
	add("configurations", false, k.Configurations...)
	add("openapi", false, k.OpenAPI["path"])
	for _, p := range k.Patches {
		add("patches", false, p.Path)
	}
	for _, p := range k.PatchesJson6902 { //nolint:staticcheck // deprecated, yet kustomize still loads it
		add("patchesJson6902", false, p.Path)
	}
	for _, p := range k.PatchesStrategicMerge { //nolint:staticcheck // deprecated, yet kustomize still loads it
		// An entry is a file path or an inline patch; only the former loads.
		if s := string(p); !strings.ContainsAny(s, "\n{") {
			add("patchesStrategicMerge", false, s)
		}
	}
	for _, r := range k.Replacements {
		add("replacements", false, r.Path)
	}
	sources := make([]types.KvPairSources, 0, len(k.ConfigMapGenerator)+len(k.SecretGenerator))
	for _, g := range k.ConfigMapGenerator {
		sources = append(sources, g.KvPairSources)
	}
	for _, g := range k.SecretGenerator {
		sources = append(sources, g.KvPairSources)
	}
	for _, s := range sources {
		for _, f := range s.FileSources {
			// "key=path" or "path"
			if _, p, ok := strings.Cut(f, "="); ok {
				f = p
			}
			add("files", false, f)
		}
		add("envs", false, s.EnvSources...)
		add("env", false, s.EnvSource)
	}
	return refs
}

// isRemote tells whether kustomize would fetch v rather than read it from
// disk: any URL (kustomize fetches http(s) files and clones git over ssh,
// https, http and file), its go-getter "git::" form, SCP-like "user@host:"
// specs and the "github.com/org/repo" shorthand.
func isRemote(v string) bool {
	lower := strings.ToLower(v)
	if strings.HasPrefix(lower, "git::") || strings.Contains(lower, "://") ||
		strings.HasPrefix(lower, "github.com/") || strings.HasPrefix(lower, "github.com:") {
		return true
	}
	user, _, ok := strings.Cut(v, "@")
	return ok && user != "" && strings.IndexFunc(user, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-'
	}) < 0
}

// maxKustomizationFile bounds what is read of a kustomization or a plugin's
// configuration to check it; kustomize reads them again, through confinedFS.
const maxKustomizationFile = 1 << 20

// readWithin reads a file of the source after checking that it, and any
// symlink on the way, stays inside the source.
func readWithin(src *source, path, what string) ([]byte, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", src.rel(path), err)
	}
	if !within(src.root, real) {
		return nil, &PathError{Path: src.rel(path), Reason: what + " that leads outside the source through a symlink"}
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", src.rel(path), err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxKustomizationFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", src.rel(path), err)
	}
	if len(data) > maxKustomizationFile {
		return nil, &KustomizeError{Kustomization: src.rel(path), Err: fmt.Errorf("larger than %d bytes", maxKustomizationFile)}
	}
	return data, nil
}

// pluginPathFields are the fields of kustomize's builtin generators and
// transformers that name files to load (ConfigMapGenerator's files, envs and
// env; the patch transformers' path and paths; ReplacementTransformer's
// path): kustomize fetches any that is a URL.
var pluginPathFields = map[string]bool{"files": true, "envs": true, "env": true, "path": true, "paths": true}

// checkPluginConfig refuses a generator or transformer configuration that
// names a remote file, a file outside the source, or a Helm chart.
func checkPluginConfig(src *source, file string) error {
	data, err := readWithin(src, file, "is a generator or transformer configuration")
	if err != nil {
		return err
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		if err := decoder.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return &KustomizeError{Kustomization: src.rel(file), Err: err}
		}
		if kind, _ := doc["kind"].(string); kind == "HelmChartInflationGenerator" {
			return &RemoteBaseError{Kustomization: src.rel(file), Field: "HelmChartInflationGenerator"}
		}
		for _, ref := range pluginPaths(doc, "") {
			if isRemote(ref.value) {
				return &RemoteBaseError{Kustomization: src.rel(file), Field: ref.field, Ref: ref.value}
			}
			target := filepath.Join(filepath.Dir(file), filepath.FromSlash(ref.value))
			if filepath.IsAbs(ref.value) || !within(src.root, target) {
				return &PathError{Path: ref.value, Reason: fmt.Sprintf("in %s (%s) is outside the source", src.rel(file), ref.field)}
			}
		}
	}
}

// pluginPaths collects, anywhere in a configuration, the strings under the
// fields that name files ("key=path" entries give their path).
func pluginPaths(v any, field string) []reference {
	var refs []reference
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			refs = append(refs, pluginPaths(child, k)...)
		}
	case []any:
		for _, child := range v {
			refs = append(refs, pluginPaths(child, field)...)
		}
	case string:
		if pluginPathFields[field] {
			if _, p, ok := strings.Cut(v, "="); ok && field == "files" {
				v = p
			}
			if v = strings.TrimSpace(v); v != "" {
				refs = append(refs, reference{field: field, value: v})
			}
		}
	}
	return refs
}
