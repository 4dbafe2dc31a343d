// SPDX-License-Identifier: Apache-2.0
//
// helm-render: renders a Helm chart like `helm template`, offline, for the chart tests.
// Test tooling, not part of the product (Helm is not in Debian's archive).
//
// It is built from what Helm itself uses: Go's text/template with sprig v3
// (Debian's golang-github-masterminds-sprig-dev), plus Helm's own functions: include, tpl,
// required, toYaml, fromYaml, fromYamlArray, toJson, fromJson, lookup (answers from
// --lookup-file, else an empty map, as `helm template` does offline), and the built-in objects
// .Values, .Release, .Chart, .Capabilities, .Template and .Files (Get only). Like `helm
// install` and `helm template` (Helm 3.0 to 3.17), it validates the merged values against the
// chart's values.schema.json with the library Helm uses for that, gojsonschema (Debian's
// golang-github-xeipuuv-gojsonschema-dev), and refuses them with Helm's message: "values don't
// meet the specifications of the schema(s) in the following chart(s):" then the chart's name and
// one "- key: what is wrong" line per error. Subcharts, hooks and toToml are not supported.
//
// Usage:
//
//	helm-render [flags] RELEASE CHART_DIR
//	  -n, --namespace NS      release namespace (default "default")
//	  -f, --values FILE       values file, repeatable, merged in order
//	  --set k=v[,k=v]         repeatable; Helm's syntax (a.b=c, a[0]=x, {x,y} lists, typed)
//	  --set-string k=v        repeatable; values stay strings
//	  --kube-version V        .Capabilities.KubeVersion (default v1.34.0); checked against
//	                          Chart.yaml's kubeVersion as `helm install` does
//	  -a, --api-versions GV   extra .Capabilities.APIVersions (repeatable)
//	  --lookup-file FILE      YAML documents that `lookup` answers from (a "cluster")
//	  --is-upgrade            .Release.IsUpgrade true (IsInstall false)
//	  -o yaml|json            YAML documents with "# Source:" lines (default), or one JSON
//	                          array of every rendered object
//	  --notes                 print the rendered templates/NOTES.txt instead
//
// Build (offline, Debian's Go in GOPATH mode): testenv/helm-render/build.sh OUT_BINARY
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/semver"
	"github.com/Masterminds/sprig"
	"github.com/xeipuuv/gojsonschema"
	yaml "gopkg.in/yaml.v3"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

type options struct {
	release, chartDir, namespace, kubeVersion, lookupFile, output string
	valueFiles, sets, setStrings, apiVersions                     multi
	isUpgrade, notes                                              bool
}

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "helm-render: "+format+"\n", args...)
	os.Exit(1)
}

func parseArgs(args []string) options {
	o := options{namespace: "default", kubeVersion: "v1.34.0", output: "yaml"}
	var pos []string
	next := func(i *int, name string) string {
		if *i+1 >= len(args) {
			die("%s needs a value", name)
		}
		*i++
		return args[*i]
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			if eq := strings.IndexByte(a, '='); eq > 0 {
				name, val, hasVal = a[:eq], a[eq+1:], true
			}
		}
		get := func() string {
			if hasVal {
				return val
			}
			return next(&i, name)
		}
		switch name {
		case "-n", "--namespace":
			o.namespace = get()
		case "-f", "--values":
			o.valueFiles.Set(get())
		case "--set":
			o.sets.Set(get())
		case "--set-string":
			o.setStrings.Set(get())
		case "--kube-version":
			o.kubeVersion = get()
		case "-a", "--api-versions":
			o.apiVersions.Set(get())
		case "--lookup-file":
			o.lookupFile = get()
		case "--is-upgrade":
			o.isUpgrade = true
		case "--notes":
			o.notes = true
		case "-o", "--output":
			o.output = get()
		case "-h", "--help":
			fmt.Println("usage: helm-render [-n NS] [-f values.yaml] [--set k=v] [--set-string k=v] " +
				"[--kube-version V] [-a GV] [--lookup-file F] [--is-upgrade] [-o yaml|json] RELEASE CHART_DIR")
			os.Exit(0)
		default:
			if strings.HasPrefix(a, "-") {
				die("unknown flag %s", a)
			}
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		die("want RELEASE CHART_DIR, got %q", pos)
	}
	o.release, o.chartDir = pos[0], pos[1]
	if o.output != "yaml" && o.output != "json" {
		die("-o must be yaml or json")
	}
	return o
}

// ---- values ---------------------------------------------------------------------------------

func readYAMLMap(file string) map[string]interface{} {
	b, err := os.ReadFile(file)
	if err != nil {
		die("%v", err)
	}
	var m map[string]interface{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		die("%s: %v", file, err)
	}
	if m == nil {
		m = map[string]interface{}{}
	}
	return m
}

// merge copies src into dst recursively; a null in src deletes the key (Helm's coalescing).
func merge(dst, src map[string]interface{}) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				merge(dm, sm)
				continue
			}
			cp := map[string]interface{}{}
			merge(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}

// splitUnescaped splits s at `sep` outside {} and not preceded by a backslash.
func splitUnescaped(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\':
			i++
		case s[i] == '{':
			depth++
		case s[i] == '}':
			depth--
		case s[i] == sep && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var intRe = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)

// typed is Helm strvals' typedVal: true, false, null and integers are typed; the rest strings.
func typed(v string, asString bool) interface{} {
	if asString {
		return v
	}
	switch strings.ToLower(v) {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if intRe.MatchString(v) {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return v
}

var indexRe = regexp.MustCompile(`^(.*)\[([0-9]+)\]$`)

// applySet applies one "a.b[0].c=v" to vals.
func applySet(vals map[string]interface{}, expr string, asString bool) {
	eq := -1
	for i := 0; i < len(expr); i++ {
		if expr[i] == '\\' {
			i++
			continue
		}
		if expr[i] == '=' {
			eq = i
			break
		}
	}
	if eq < 0 {
		die("--set %q: key=value expected", expr)
	}
	key, raw := expr[:eq], expr[eq+1:]
	var val interface{}
	if strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}") {
		list := []interface{}{}
		if inner := raw[1 : len(raw)-1]; inner != "" {
			for _, item := range splitUnescaped(inner, ',') {
				list = append(list, typed(unescape(item), asString))
			}
		}
		val = list
	} else {
		val = typed(unescape(raw), asString)
	}
	parts := splitUnescaped(key, '.')
	var cur interface{} = vals
	setIn := func(container interface{}, k string, idx int, v interface{}, last bool) interface{} {
		m := container.(map[string]interface{})
		if idx < 0 {
			if last {
				if v == nil {
					delete(m, k)
				} else {
					m[k] = v
				}
				return nil
			}
			child, ok := m[k].(map[string]interface{})
			if !ok {
				child = map[string]interface{}{}
				m[k] = child
			}
			return child
		}
		list, _ := m[k].([]interface{})
		for len(list) <= idx {
			list = append(list, nil)
		}
		if last {
			list[idx] = v
			m[k] = list
			return nil
		}
		child, ok := list[idx].(map[string]interface{})
		if !ok {
			child = map[string]interface{}{}
			list[idx] = child
		}
		m[k] = list
		return child
	}
	for i, p := range parts {
		p = unescape(p)
		idx := -1
		if mm := indexRe.FindStringSubmatch(p); mm != nil {
			p = mm[1]
			idx, _ = strconv.Atoi(mm[2])
		}
		cur = setIn(cur, p, idx, val, i == len(parts)-1)
	}
}

// ---- chart ----------------------------------------------------------------------------------

type chartMeta map[string]interface{}

// chartObject mirrors Helm's .Chart: the Chart.yaml fields with capitalised names.
func chartObject(meta chartMeta) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range meta {
		out[strings.ToUpper(k[:1])+k[1:]] = v
	}
	for _, k := range []string{"Name", "Version", "AppVersion", "Description", "KubeVersion", "Type"} {
		if _, ok := out[k]; !ok {
			out[k] = ""
		}
	}
	return out
}

type apiVersions []string

func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

// The group versions a current cluster serves (the kinds this chart uses, and their
// neighbours), as .Capabilities.APIVersions.
var defaultAPIVersions = []string{
	"v1", "apps/v1", "batch/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
	"coordination.k8s.io/v1", "admissionregistration.k8s.io/v1", "networking.k8s.io/v1",
	"scheduling.k8s.io/v1", "storage.k8s.io/v1", "apiextensions.k8s.io/v1",
	"policy/v1/PodDisruptionBudget", "apps/v1/Deployment",
}

// servedAPIVersions: defaultAPIVersions as a server of version v serves them (policy/v1 came
// in 1.21; before, PodDisruptionBudgets were policy/v1beta1).
func servedAPIVersions(v *semver.Version) []string {
	var out []string
	for _, gv := range defaultAPIVersions {
		if strings.HasPrefix(gv, "policy/v1") && v.Major() == 1 && v.Minor() < 21 {
			continue
		}
		out = append(out, gv)
	}
	if v.Major() == 1 && v.Minor() < 25 {
		out = append(out, "policy/v1beta1", "policy/v1beta1/PodDisruptionBudget")
	}
	return out
}

type files struct{ dir string }

func (f files) Get(name string) string {
	b, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(name)))
	if err != nil {
		return ""
	}
	return string(b)
}

// ---- functions ------------------------------------------------------------------------------

func toYAML(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	enc.Close()
	return strings.TrimSuffix(buf.String(), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromYAMLArray(s string) []interface{} {
	var a []interface{}
	if err := yaml.Unmarshal([]byte(s), &a); err != nil {
		return []interface{}{err.Error()}
	}
	return a
}

func toJSON(v interface{}) string {
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return ""
	}
	return string(b)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// jsonable turns yaml.v3's maps (map[string]interface{}, possibly map[interface{}]interface{})
// into what encoding/json takes.
func jsonable(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := map[string]interface{}{}
		for k, x := range t {
			out[k] = jsonable(x)
		}
		return out
	case map[interface{}]interface{}:
		out := map[string]interface{}{}
		for k, x := range t {
			out[fmt.Sprint(k)] = jsonable(x)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, x := range t {
			out[i] = jsonable(x)
		}
		return out
	}
	return v
}

type lookupIndex []map[string]interface{}

func (l lookupIndex) lookup(apiVersion, kind, ns, name string) (map[string]interface{}, error) {
	var items []interface{}
	for _, obj := range l {
		meta, _ := obj["metadata"].(map[string]interface{})
		if obj["apiVersion"] != apiVersion || obj["kind"] != kind {
			continue
		}
		if ns != "" && fmt.Sprint(meta["namespace"]) != ns {
			continue
		}
		if name != "" {
			if fmt.Sprint(meta["name"]) == name {
				return obj, nil
			}
			continue
		}
		items = append(items, obj)
	}
	if name != "" {
		return map[string]interface{}{}, nil
	}
	return map[string]interface{}{"items": items}, nil
}

// ---- values.schema.json ----------------------------------------------------------------------

// validateValues checks the merged values (the chart's defaults, -f files, --set) against the
// chart's values.schema.json, when it has one, as Helm's chartutil.ValidateAgainstSchema does
// before rendering: the values as JSON, validated by gojsonschema, every error listed.
func validateValues(chartName, chartDir string, values map[string]interface{}) {
	schema, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		die("%v", err)
	}
	valuesJSON, err := json.Marshal(jsonable(values))
	if err != nil {
		die("values: %v", err)
	}
	compiled, err := gojsonschema.NewSchema(gojsonschema.NewBytesLoader(schema))
	if err != nil {
		die("unable to compile schema: %v", err)
	}
	result, err := compiled.Validate(gojsonschema.NewBytesLoader(valuesJSON))
	if err != nil {
		die("unable to validate schema: %v", err)
	}
	if result.Valid() {
		return
	}
	var sb strings.Builder
	for _, e := range result.Errors() {
		fmt.Fprintf(&sb, "- %s\n", e)
	}
	die("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%s",
		chartName, strings.TrimSuffix(sb.String(), "\n"))
}

// ---- rendering ------------------------------------------------------------------------------

type renderer struct {
	root    *template.Template
	values  map[string]interface{}
	context map[string]interface{}
}

func (r *renderer) funcs(l lookupIndex) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env") // Helm removes these two
	delete(f, "expandenv")
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	f["fromYamlArray"] = fromYAMLArray
	f["toJson"] = toJSON
	f["fromJson"] = fromJSON
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	f["lookup"] = l.lookup
	// include and tpl need the template set; bound late (see render).
	f["include"] = func(string, interface{}) (string, error) { return "", errors.New("unbound") }
	f["tpl"] = func(string, interface{}) (string, error) { return "", errors.New("unbound") }
	return f
}

func (r *renderer) include(name string, data interface{}) (string, error) {
	var buf bytes.Buffer
	if err := r.root.ExecuteTemplate(&buf, name, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func (r *renderer) tpl(text string, data interface{}) (string, error) {
	t, err := r.root.Clone()
	if err != nil {
		return "", err
	}
	t, err = t.New("tpl").Parse(text)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", err
	}
	return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
}

func main() {
	o := parseArgs(os.Args[1:])
	chartDir := filepath.Clean(o.chartDir)

	var meta chartMeta
	{
		b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
		if err != nil {
			die("%v", err)
		}
		if err := yaml.Unmarshal(b, &meta); err != nil {
			die("Chart.yaml: %v", err)
		}
	}
	chartName := fmt.Sprint(meta["name"])
	if kv, ok := meta["kubeVersion"].(string); ok && kv != "" {
		c, err := semver.NewConstraint(kv)
		if err != nil {
			die("Chart.yaml kubeVersion %q: %v", kv, err)
		}
		v, err := semver.NewVersion(o.kubeVersion)
		if err != nil {
			die("--kube-version %q: %v", o.kubeVersion, err)
		}
		if !c.Check(v) {
			die("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", kv, o.kubeVersion)
		}
	}

	values := readYAMLMap(filepath.Join(chartDir, "values.yaml"))
	for _, f := range o.valueFiles {
		merge(values, readYAMLMap(f))
	}
	for _, s := range o.sets {
		for _, e := range splitUnescaped(s, ',') {
			applySet(values, e, false)
		}
	}
	for _, s := range o.setStrings {
		for _, e := range splitUnescaped(s, ',') {
			applySet(values, e, true)
		}
	}
	validateValues(chartName, chartDir, values)

	var lk lookupIndex
	if o.lookupFile != "" {
		b, err := os.ReadFile(o.lookupFile)
		if err != nil {
			die("%v", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var obj map[string]interface{}
			if err := dec.Decode(&obj); err != nil {
				break
			}
			if obj != nil {
				lk = append(lk, obj)
			}
		}
	}

	kv, _ := semver.NewVersion(o.kubeVersion)
	caps := map[string]interface{}{
		"KubeVersion": map[string]interface{}{
			"Version":    "v" + kv.String(),
			"GitVersion": "v" + kv.String(),
			"Major":      strconv.FormatUint(kv.Major(), 10),
			"Minor":      strconv.FormatUint(kv.Minor(), 10),
		},
		"APIVersions": apiVersions(append(servedAPIVersions(kv), o.apiVersions...)),
		"HelmVersion": map[string]interface{}{"Version": "v3.0.0-helm-render"},
	}
	release := map[string]interface{}{
		"Name": o.release, "Namespace": o.namespace, "Service": "Helm",
		"IsInstall": !o.isUpgrade, "IsUpgrade": o.isUpgrade, "Revision": 1,
	}
	if o.isUpgrade {
		release["Revision"] = 2
	}

	// Templates: every file under templates/, parsed into one set; Helm parses the deepest
	// paths first, so a shallower `define` of the same name wins (engine.go sortTemplates).
	type tfile struct{ name, text string }
	var tfiles []tfile
	tdir := filepath.Join(chartDir, "templates")
	err := filepath.Walk(tdir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		tfiles = append(tfiles, tfile{path.Join(chartName, filepath.ToSlash(rel)), string(b)})
		return nil
	})
	if err != nil {
		die("%v", err)
	}
	sort.SliceStable(tfiles, func(i, j int) bool {
		di, dj := strings.Count(tfiles[i].name, "/"), strings.Count(tfiles[j].name, "/")
		if di != dj {
			return di > dj
		}
		return tfiles[i].name > tfiles[j].name
	})

	r := &renderer{values: values}
	fm := r.funcs(lk)
	r.root = template.New("gotpl").Option("missingkey=zero")
	r.root.Funcs(fm)
	r.root.Funcs(template.FuncMap{"include": r.include, "tpl": r.tpl})
	for _, tf := range tfiles {
		if _, err := r.root.New(tf.name).Parse(tf.text); err != nil {
			die("%v", err)
		}
	}

	newData := func(name string) map[string]interface{} {
		return map[string]interface{}{
			"Values": values, "Release": release, "Chart": chartObject(meta),
			"Capabilities": caps, "Files": files{chartDir},
			"Template": map[string]interface{}{"Name": name, "BasePath": path.Join(chartName, "templates")},
		}
	}
	if o.notes {
		name := path.Join(chartName, "templates", "NOTES.txt")
		var buf bytes.Buffer
		if err := r.root.ExecuteTemplate(&buf, name, newData(name)); err != nil {
			die("%v", err)
		}
		os.Stdout.WriteString(strings.ReplaceAll(buf.String(), "<no value>", ""))
		return
	}

	var names []string
	for _, tf := range tfiles {
		base := path.Base(tf.name)
		if strings.HasPrefix(base, "_") || strings.HasSuffix(base, ".txt") {
			continue
		}
		names = append(names, tf.name)
	}
	sort.Strings(names)

	var out bytes.Buffer
	var objects []interface{}
	for _, name := range names {
		data := newData(name)
		var buf bytes.Buffer
		if err := r.root.ExecuteTemplate(&buf, name, data); err != nil {
			die("%v", err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		// Split into documents and check that each is YAML (helm install would refuse it).
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var obj map[string]interface{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				die("%s (document %d): not YAML: %v\n%s", name, i, err, doc)
			}
			if obj == nil {
				continue // comments only
			}
			if obj["kind"] == nil || obj["apiVersion"] == nil {
				die("%s (document %d): an object without kind or apiVersion", name, i)
			}
			objects = append(objects, jsonable(obj))
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, strings.Trim(doc, "\n"))
		}
	}
	if o.output == "json" {
		b, err := json.MarshalIndent(objects, "", "  ")
		if err != nil {
			die("%v", err)
		}
		os.Stdout.Write(append(b, '\n'))
		return
	}
	os.Stdout.Write(out.Bytes())
}
