package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// errorBody is OpenAI's error shape.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// errorType maps a status to OpenAI's error types.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

func errorJSONStatus(status int, code, message, param string) []byte {
	var b errorBody
	b.Error.Message, b.Error.Type, b.Error.Code = message, errorType(status), code
	if code == "insufficient_quota" {
		b.Error.Type = "insufficient_quota"
	}
	if param != "" {
		b.Error.Param = &param
	}
	data, _ := json.Marshal(b)
	return data
}

// writeError answers with an error in OpenAI's shape, after the headers
// in extra.
func writeError(w http.ResponseWriter, extra http.Header, status int, code, message, param string) {
	h := w.Header()
	for k, v := range extra {
		h[k] = v
	}
	body := errorJSONStatus(status, code, message, param)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
