package gateway_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/model"
)

// A model server that reports no usage (some self-hosted ones do not) is
// not free: the call is charged the prompt as estimated and the answer as
// the gateway counts it, and the budget runs out.
func TestAnAnswerWithoutUsageIsChargedWhatItProduced(t *testing.T) {
	backends(t, func(t *testing.T, opts ...envOption) {
		e := newEnv(t, func(g *model.Gateway, up string) {
			standard(g, up)
			g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Tokens: 400}}
		}, opts...)
		const reply = "forty-two is the answer"
		e.up.set("meta/llama", behaviour{reply: reply, noUsage: true})
		var answered int
		var last response
		for answered < 50 {
			last = e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":30`))
			if last.status != 200 {
				break
			}
			answered++
		}
		if last.status != 429 || last.json("error.code").Str != "insufficient_quota" {
			t.Fatalf("after %d calls: %d %s, want the budget to run out", answered, last.status, last.body)
		}
		calls := e.ledger(answered + 1)
		// "hello there" and a message's overhead; the reply a token a byte.
		in, out := int64(len("hello there")+8), int64(len(reply))
		var total int64
		for _, c := range calls[:answered] {
			if c.Outcome != model.CallOK || c.InputTokens != in || c.OutputTokens != out || c.CostMicros <= 0 {
				t.Fatalf("a call on the ledger: %s, want %d and %d tokens, and a cost", dump(c), in, out)
			}
			total += c.InputTokens + c.OutputTokens
		}
		// Each call reserved 19+30 tokens and settled to 19+23: the budget
		// of 400 holds 8 calls at what they reserve and 9 at what they
		// used, as the settlements come in.
		if total > 400 || answered < 8 || answered > 9 {
			t.Fatalf("%d calls charged %d tokens of a budget of 400, want 8 or 9 calls", answered, total)
		}
	})
}

// max_tokens is bounded twice: by what any model produces (a larger one is
// refused, before it can overflow an estimate and lower the counters) and
// by the most the alias's models can produce (what is reserved).
func TestMaxTokensIsBoundedByTheCallAndByTheModels(t *testing.T) {
	backends(t, func(t *testing.T, opts ...envOption) {
		e := newEnv(t, func(g *model.Gateway, up string) {
			standard(g, up)
			g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Tokens: 1_500}}
		}, opts...)
		r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":9223372036854775807`))
		if r.status != 400 || r.json("error.type").Str != "invalid_request_error" ||
			!strings.Contains(r.json("error.message").Str, "max_tokens must be at most 16777216") {
			t.Fatalf("a max_tokens past any model: %d %s", r.status, r.body)
		}
		if seen := e.up.calls(); len(seen) != 0 {
			t.Fatalf("the upstream saw %+v", seen)
		}
		// llama and its fallback produce at most 1,000 tokens: a call asking
		// for a million reserves 1,000 (and its prompt), which fits.
		r = e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":1000000`))
		if r.status != 200 {
			t.Fatalf("a max_tokens past the models' maximum: %d %s, want it reserved at the maximum", r.status, r.body)
		}
		// What the call used (19 + 3) is settled: another such call fits,
		// a third would if the first two were settled; a budget of 1,500
		// never holds two reservations of 1,019 at once.
		eventually.True(t, "", func() bool {
			return e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":1000000`)).status == 200
		})
	})
}

// A call whose estimate alone is more than a tokens-per-minute limit can
// never pass it: it is refused without a Retry-After and with
// X-Should-Retry: false, so SDKs do not retry it, and told what to lower.
// A call that fits is answered with the token window's headers.
func TestACallLargerThanATokenRateLimitIsNotToldToWait(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.RateLimits = []*model.RateLimit{{Scope: model.RateLimitUser, TokensPerMinute: 500}}
	}, withClock(newClock()))
	r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":1000`))
	if r.status != 429 || r.json("error.code").Str != "rate_limit_exceeded" || r.header.Get("X-Should-Retry") != "false" ||
		r.header.Get("Retry-After") != "" || !strings.Contains(r.json("error.message").Str, "may use up to 1019 tokens") ||
		!strings.Contains(r.json("error.message").Str, "lower max_tokens") {
		t.Fatalf("a call larger than the limit: %d %v %s", r.status, r.header, r.body)
	}
	r = e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":100`))
	if r.status != 200 || r.header.Get("X-Ratelimit-Limit-Tokens") != "500" || r.header.Get("X-Ratelimit-Remaining-Tokens") != "381" ||
		r.header.Get("X-Ratelimit-Reset-Tokens") == "" {
		t.Fatalf("a call that fits: %d %v", r.status, r.header)
	}
	// One that fits the limit but not what is left of it waits.
	r = e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":480`))
	if r.status != 429 || r.header.Get("X-Should-Retry") == "false" || r.header.Get("Retry-After") == "" {
		t.Fatalf("a call that fits the limit but not what is left: %d %v %s", r.status, r.header, r.body)
	}
}
