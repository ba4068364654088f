/* JSON bodies of requests, replies and notifications, and the error-code names. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "message.h"

static const char *const error_names[PROTO_E_COUNT] = {
        [PROTO_OK] = "ok",
        [PROTO_E_INVALID] = "invalid",
        [PROTO_E_BAD_HANDLE] = "bad-handle",
        [PROTO_E_NO_MEMORY] = "no-memory",
        [PROTO_E_QUOTA] = "quota",
        [PROTO_E_LIMIT] = "limit",
        [PROTO_E_PERMISSION] = "permission",
        [PROTO_E_UNSUPPORTED] = "unsupported",
        [PROTO_E_SHAPE] = "shape",
        [PROTO_E_OUT_OF_RANGE] = "out-of-range",
        [PROTO_E_PROTOCOL] = "protocol",
        [PROTO_E_VERSION] = "version",
        [PROTO_E_DEVICE] = "device",
        [PROTO_E_EXEC] = "exec",
        [PROTO_E_BUSY] = "busy",
        [PROTO_E_NOT_READY] = "not-ready",
        [PROTO_E_CANCELLED] = "cancelled",
        [PROTO_E_CONNECTION] = "connection",
        [PROTO_E_SYSTEM] = "system",
};

const char *proto_error_name(int code)
{
        if (code < 0 || code >= PROTO_E_COUNT)
                return "unknown";
        return error_names[code];
}

json_t *proto_request_new(const char *method, json_t *params)
{
        return json_pack("{s:s, s:o}", "method", method, "params", params ? params : json_object());
}

int proto_request_parse(json_t *body, const char **ret_method, json_t **ret_params,
                        char *err, size_t errlen)
{
        json_t *method, *params;

        if (!json_is_object(body)) {
                snprintf(err, errlen, "request body must be a JSON object");
                return -EBADMSG;
        }
        method = json_object_get(body, "method");
        if (!json_is_string(method)) {
                snprintf(err, errlen, "request field 'method' must be a string");
                return -EBADMSG;
        }
        params = json_object_get(body, "params");
        if (params && !json_is_object(params)) {
                snprintf(err, errlen, "request field 'params' must be an object");
                return -EBADMSG;
        }
        if (json_object_size(body) != 1u + (params != NULL)) {
                snprintf(err, errlen, "request has fields other than 'method' and 'params'");
                return -EBADMSG;
        }
        *ret_method = json_string_value(method);
        *ret_params = params;
        return 0;
}

json_t *proto_reply_result(json_t *result)
{
        return json_pack("{s:o}", "result", result ? result : json_object());
}

json_t *proto_reply_error(int code, const char *message)
{
        return json_pack("{s:{s:i, s:s, s:s}}", "error", "code", code, "name",
                         proto_error_name(code), "message", message ? message : "");
}

int proto_reply_parse(json_t *body, json_t **ret_result, char *err, size_t errlen)
{
        json_t *result, *error;
        json_int_t code;
        const char *message;

        if (!json_is_object(body))
                return -EBADMSG;
        result = json_object_get(body, "result");
        if (result) {
                *ret_result = result;
                return 0;
        }
        error = json_object_get(body, "error");
        if (json_unpack(error, "{s:I, s:s}", "code", &code, "message", &message) < 0 ||
            code <= 0 || code > 1000)
                return -EBADMSG;
        snprintf(err, errlen, "%s", message);
        return (int)code;
}

json_t *proto_notify_new(const char *event, json_t *data)
{
        return json_pack("{s:s, s:o}", "event", event, "data", data ? data : json_object());
}

json_t *proto_json_parse(const void *body, size_t len, char *err, size_t errlen)
{
        json_error_t jerr;
        json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);

        if (!v)
                snprintf(err, errlen, "body is not valid JSON: %s at offset %d", jerr.text,
                         jerr.position);
        return v;
}

char *proto_json_dump(const json_t *v, size_t *ret_len)
{
        char *s = json_dumps(v, JSON_COMPACT);
        if (s && ret_len)
                *ret_len = strlen(s);
        return s;
}
