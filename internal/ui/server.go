// Package ui is the web UI of kubectl vidra ui: server-rendered pages of the fleet as the
// hub shows it to the caller, with the caller's own credentials (so every view honours
// the caller's RBAC), kept live by watches on the hub pushed to the page as server-sent
// events. Every asset is embedded: it works without any network but the hub's.
package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Options configure a Server.
type Options struct {
	// Config reaches the hub as the caller.
	Config *rest.Config
	Scheme *runtime.Scheme
	Log    logr.Logger
	// OperatorNamespace holds the revision history (ControllerRevisions).
	OperatorNamespace string
}

// kind is one kind the UI reads, and whether the caller may.
type kind struct {
	resource, group, namespace string
	obj                        client.Object // watched; nil: listed when a page is shown
	allowed                    bool
	why                        string
}

// Server serves the UI.
type Server struct {
	opts   Options
	client client.Client // uncached: Events, revisions, actions
	cache  cache.Cache   // the kinds the caller may list and watch
	kinds  map[string]*kind
	pages  *template.Template
	token  string // guards the actions against other sites' forms
	// key is in the fragment of the URL the command prints (never sent to a server);
	// the page keeps it in the tab's sessionStorage, which only this origin (port
	// included) reads, and sends it as a bearer token with every request for data. Not
	// a cookie: cookies ignore ports, so any other service on 127.0.0.1 would get it.
	// Without it no data is served, so another local user or a page of another site
	// reads nothing.
	key     string
	deliver *deliverRights

	mu          sync.Mutex
	subscribers map[chan struct{}]bool
}

// New checks what the caller may read, starts watches on it and returns the server. The
// watches run until ctx ends.
func New(ctx context.Context, opts Options) (*Server, error) {
	c, err := client.New(opts.Config, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, fmt.Errorf("hub client: %w", err)
	}
	token, key := make([]byte, 16), make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("action token: %w", err)
	}
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("access key: %w", err)
	}
	pages, err := template.New("").Funcs(funcs).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	s := &Server{opts: opts, client: c, pages: pages, token: hex.EncodeToString(token), key: hex.EncodeToString(key),
		deliver: newDeliverRights(c), subscribers: map[chan struct{}]bool{}}
	s.kinds = map[string]*kind{
		"vidraclusters":       {resource: "vidraclusters", group: vidrav1alpha1.GroupVersion.Group, obj: &vidrav1alpha1.VidraCluster{}},
		"vidraresources":      {resource: "vidraresources", group: vidrav1alpha1.GroupVersion.Group, obj: &vidrav1alpha1.VidraResource{}},
		"events":              {resource: "events", group: "events.k8s.io"},
		"controllerrevisions": {resource: "controllerrevisions", group: "apps", namespace: opts.OperatorNamespace},
	}
	// Every kind of sync: infrahubsyncs, gitsyncs, ocisyncs, helmsyncs.
	for _, k := range vidrav1alpha1.SyncKinds() {
		s.kinds[k.Resource] = &kind{resource: k.Resource, group: vidrav1alpha1.GroupVersion.Group, obj: k.New()}
	}
	for _, k := range s.kinds {
		k.allowed, k.why, err = s.mayRead(ctx, k)
		if err != nil {
			return nil, err
		}
	}
	s.cache, err = cache.New(opts.Config, cache.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, fmt.Errorf("hub cache: %w", err)
	}
	for _, k := range s.kinds {
		if k.obj == nil || !k.allowed {
			continue
		}
		informer, err := s.cache.GetInformer(ctx, k.obj)
		if meta.IsNoMatchError(err) {
			// A hub of an older Vidra does not serve every kind of sync: its views say so.
			k.allowed, k.why = false, fmt.Sprintf("the hub does not serve %s.%s (an older Vidra?)", k.resource, k.group)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", k.resource, err)
		}
		notify := func(any) { s.broadcast() }
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: notify, DeleteFunc: notify, UpdateFunc: func(_, o any) { notify(o) },
		}); err != nil {
			return nil, fmt.Errorf("watch %s: %w", k.resource, err)
		}
	}
	go func() {
		if err := s.cache.Start(ctx); err != nil {
			opts.Log.Error(err, "hub watches stopped")
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !s.cache.WaitForCacheSync(syncCtx) {
		return nil, fmt.Errorf("the hub's objects were not read within 30s")
	}
	return s, nil
}

// mayRead asks the hub whether the caller may list the kind, and watch it when it is
// watched.
func (s *Server) mayRead(ctx context.Context, k *kind) (bool, string, error) {
	verbs := []string{"list", "watch"}
	if k.obj == nil {
		verbs = verbs[:1]
	}
	for _, verb := range verbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: k.group, Resource: k.resource, Namespace: k.namespace},
		}}
		if err := s.client.Create(ctx, review); err != nil {
			return false, "", fmt.Errorf("ask the hub what you may read: %w", err)
		}
		if !review.Status.Allowed {
			where := "on the hub"
			if k.namespace != "" {
				where = "in namespace " + k.namespace
			}
			return false, fmt.Sprintf("you may not %s %s.%s %s", verb, k.resource, k.group, where), nil
		}
	}
	return true, "", nil
}

// Handler serves the pages, their views, the live events, the actions and the assets.
// A page is a shell that holds no data: its script reads the key from the URL's
// fragment, then fetches the view, the events and the actions with it.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFiles, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	for _, p := range []struct {
		name, pattern string
		view          func(*http.Request) (any, error)
	}{
		{"fleet", "/{$}", s.fleetView},
		{"syncs", "/syncs", s.syncsView},
		{"bundle", "/bundles/{name}", s.bundleView},
		{"graph", "/graph", s.graphView},
	} {
		mux.HandleFunc("GET "+p.pattern, s.shell(p.name))
		mux.Handle("GET /view"+p.pattern, s.keyed(s.page(p.name, p.view)))
	}
	mux.Handle("GET /events", s.keyed(http.HandlerFunc(s.events)))
	mux.Handle("POST /syncs/{resource}/{name}/sync", s.keyed(http.HandlerFunc(s.syncNow)))
	return s.guard(mux)
}

// Key is the access key the page sends with its requests; the URL the command prints
// carries it in its fragment (#key=…).
func (s *Server) Key() string { return s.key }

// guard serves only this machine's browser, on the address the command printed: the Host
// must be the loopback (no DNS rebinding), pages may not be framed, and a POST must come
// from the UI's own pages.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		host, _, err := net.SplitHostPort(req.Host)
		if err != nil || (host != "127.0.0.1" && host != "localhost") {
			http.Error(w, "the UI answers on 127.0.0.1 only", http.StatusForbidden)
			return
		}
		if req.Method == http.MethodPost {
			if origin := req.Header.Get("Origin"); origin != "" && origin != "http://"+req.Host {
				http.Error(w, "this action comes from another site", http.StatusForbidden)
				return
			}
		}
		w.Header().Set("X-Frame-Options", "DENY")
		// The key never is in a URL the server sees; nothing else of a page leaks either.
		w.Header().Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, req)
	})
}

// keyed serves only a request that carries the access key as a bearer token: 401
// without it, 403 with another.
func (s *Server) keyed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		if !ok || key == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kubectl vidra ui"`)
			http.Error(w, "open the URL kubectl vidra ui printed: it carries the key", http.StatusUnauthorized)
			return
		}
		if subtle.ConstantTimeCompare([]byte(key), []byte(s.key)) != 1 {
			http.Error(w, "wrong key: open the URL kubectl vidra ui printed", http.StatusForbidden)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, req)
	})
}

// contentPolicy lets a page load only the UI's own script, styles and requests.
const contentPolicy = "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'"

// shell renders a page without its view: its script fetches the view with the key.
func (s *Server) shell(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", contentPolicy)
		if err := s.pages.ExecuteTemplate(w, "layout", page{Name: name}); err != nil {
			s.opts.Log.Error(err, "render", "page", name)
		}
	}
}

// page renders a view, which the page's script swaps in when it opens and whenever the
// hub changes.
func (s *Server) page(name string, view func(*http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		data, err := view(req)
		if err != nil {
			s.opts.Log.Error(err, "render", "page", name)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", contentPolicy)
		if err := s.pages.ExecuteTemplate(w, name, page{Name: name, Token: s.token, Data: data}); err != nil {
			s.opts.Log.Error(err, "render", "page", name)
		}
	}
}

type page struct {
	Name, Token string
	Data        any
}

// events streams "change" to the page whenever a watched object changes.
func (s *Server) events(w http.ResponseWriter, req *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subscribers[ch] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subscribers, ch)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fmt.Fprint(w, "retry: 1000\n\n")
	flusher.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-ch:
			fmt.Fprint(w, "event: change\ndata: {}\n\n")
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
		}
		flusher.Flush()
	}
}

// broadcast tells every open page that something changed; a page already told once and
// not yet refreshed is not told twice.
func (s *Server) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subscribers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
