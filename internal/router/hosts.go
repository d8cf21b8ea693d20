package router

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/identity"
)

// Serving each instance on a host name of its own (issue 39, defect 6).
//
// An app runs whatever its user puts in it. Served by path on the control
// plane's origin, a notebook page opened by a colleague runs script in the
// origin of the dashboard (its storage holds the viewer's key) and of every
// instance that browser has open. With Config.Hosts set, each instance is
// its own origin, {id}.{domain}:
//
//   - on an instance host the router serves that instance and nothing
//     else: no API, no dashboard, no other instance;
//   - /apps/{id}/… on the control plane's host answers 307 to the same
//     path on the instance's host, and serves no app content there;
//   - the browser signs in on the instance host: the dashboard posts its
//     access token to https://{id}.{domain}/_klique/signin (a form in a
//     new tab, from the dashboard's origin only), the router checks that
//     the holder may open the instance and sets a host-only cookie — no
//     Domain attribute, Path=/, HttpOnly, SameSite=Lax; over TLS it is
//     Secure and named __Host-klique_app, which a sibling host cannot set
//     or shadow — then sends the tab to /. The router strips the cookie
//     before forwarding, so the app never sees it, and no other host (the
//     API's included) ever receives it;
//   - /routes/{route}/… stays on the control plane's host for programs:
//     it takes credentials in headers only (no cookie, no sign-in hop), and
//     its answers carry Content-Security-Policy: sandbox, so a browser
//     sent there renders them in an opaque origin with no script.

// HostCookieName is the sign-in cookie on an instance's own host over TLS:
// the __Host- prefix makes the browser refuse one set with a Domain (by a
// sibling instance, to shadow this one's) or without Secure.
const HostCookieName = "__Host-klique_app"

// secure reports whether the browser reached the router over TLS (itself,
// or a proxy in front that says so).
func secure(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// hostCookie is the sign-in cookie's name on an instance host.
func hostCookie(r *http.Request) string {
	if secure(r) {
		return HostCookieName
	}
	return CookieName
}

// ForInstanceHost reports whether a request is for an instance's own host
// ({id}.{domain}), which the router serves whole: the control plane's
// handler sends such requests here before any other route.
func (rt *Router) ForInstanceHost(r *http.Request) bool {
	_, ok := rt.cfg.Hosts.InstanceOf(r.Host)
	return ok
}

// serveHost serves a request on instance id's own host: its sign-in hop,
// or the app, with the path as the browser sent it.
func (rt *Router) serveHost(w http.ResponseWriter, r *http.Request, id string) {
	if r.URL.Path == SignInPath {
		rt.signInHost(w, r, id)
		return
	}
	cred, err := credential(r, hostCookie(r))
	if err != nil {
		writeError(w, r, unauthenticated(fmt.Sprintf("sign in: open the instance from the dashboard's Apps page (its link signs this browser in to %s), or send 'Authorization: Bearer <API key or access token>'",
			rt.cfg.Hosts.Origin(id))))
		return
	}
	in, err := rt.resolve(r.Context(), cred, "apps", id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	hp := &hop{label: "/apps/" + id}
	// An app told its own path (JupyterLab's base_url=/apps/{id}/) gets
	// it on every request: the browser at / is sent there as the app
	// would be under the path.
	if own := "/apps/" + in.ID; in.KeepPrefix && r.URL.Path != own && !strings.HasPrefix(r.URL.Path, own+"/") {
		hp.own = own
	}
	rt.forward(w, r, in, hp)
}

// redirectToHost answers a request for /apps/{id}/rest on the control
// plane's host with 307 to the instance's own host: rest, and the query,
// unchanged (a POST is sent on as a POST).
func (rt *Router) redirectToHost(w http.ResponseWriter, r *http.Request, id, rest string) {
	if rest == "" {
		rest = "/"
	}
	u := rt.cfg.Hosts.Origin(id) + rest
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u, http.StatusTemporaryRedirect)
}

// signInHost is the browser's sign-in on an instance's own host: POST
// /_klique/signin with the form field "token" (or an Authorization
// header), from the dashboard's origin only. It sets the host-only cookie
// and sends the browser to the app's root with 303.
func (rt *Router) signInHost(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "BAD_USER_INPUT",
			Message: "sign in with POST " + SignInPath + " and the form field 'token' (an access token or API key); the dashboard's Apps page does this when you follow an instance's link"})
		return
	}
	// Only the dashboard may sign a browser in: not this instance's own
	// pages, not another instance's, not another site.
	if !rt.signInOriginListed(r.Header.Get("Origin")) {
		writeError(w, r, &Error{Status: http.StatusForbidden, Code: "FORBIDDEN",
			Message: "a sign-in to an app instance must come from the dashboard; open the instance from the dashboard's Apps page"})
		return
	}
	cred, err := identity.ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil || cred == "" {
		cred = strings.TrimSpace(r.PostFormValue("token"))
	}
	if cred == "" {
		writeError(w, r, unauthenticated("send the credential to sign in with as the form field 'token' (an access token or API key)"))
		return
	}
	kept, expires, err := rt.checkSignIn(r.Context(), cred, "apps", id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: hostCookie(r), Value: kept, Path: "/", Expires: expires,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(r),
	})
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// checkSignIn checks that a credential's holder may open an instance (or
// a route) now and returns what the cookie keeps for it.
func (rt *Router) checkSignIn(ctx context.Context, cred, kind, name string) (string, time.Time, error) {
	var err error
	if kind == "apps" {
		_, err = rt.cfg.Resolver.Instance(ctx, cred, name)
	} else {
		_, err = rt.cfg.Resolver.Route(ctx, cred, name)
	}
	if err != nil {
		return "", time.Time{}, err
	}
	return rt.cfg.Resolver.CookieCredential(ctx, cred)
}

// signInOriginListed reports whether an Origin is one configured for
// sign-ins (the dashboard's); no Origin (a program) is accepted.
func (rt *Router) signInOriginListed(o string) bool {
	if o == "" {
		return true
	}
	for _, a := range rt.cfg.SignInOrigins {
		if strings.TrimRight(a, "/") == strings.TrimRight(o, "/") {
			return true
		}
	}
	return false
}

// sandbox makes a route's answer, on the control plane's origin, render
// in an opaque origin with no script, should a browser be sent there.
func sandbox(resp *http.Response) error {
	if h, _ := resp.Request.Context().Value(hopKey{}).(*hop); h != nil && h.sandbox {
		resp.Header.Set("Content-Security-Policy", "sandbox")
	}
	return nil
}
