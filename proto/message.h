/* JSON message bodies: building and taking apart requests, replies and notifications. */
#ifndef NPU_PROTO_MESSAGE_H
#define NPU_PROTO_MESSAGE_H

#include <jansson.h>
#include <stddef.h>

#include "errors.h"

/* {"method": method, "params": params}; steals params (NULL means {}). */
json_t *proto_request_new(const char *method, json_t *params);
/* Split a request body. On success *ret_method points into body and *ret_params is a
 * borrowed object. -EBADMSG with a message in err when the shape is wrong. */
/* Longest method name the text fast paths handle (longer ones take the JSON path). */
#define PROTO_METHOD_MAX 64

/* Is body exactly {"method":"NAME"} or {"method":"NAME","params":{}} with NAME made of
 * letters, digits, '_' and '-'? Then NAME is copied (NUL-terminated) into method and 1 is
 * returned; 0 for anything else, which the JSON path handles (and judges). */
int proto_request_bare(const void *body, size_t len, char *method, size_t cap);

/* The body of a request without parameters, as proto_request_new + proto_json_dump would
 * encode it, written into buf; its length, or 0 when the method needs the JSON path (a name
 * outside the characters above, or too long for cap). */
size_t proto_request_bare_encode(const char *method, char *buf, size_t cap);

int proto_request_parse(json_t *body, const char **ret_method, json_t **ret_params,
                        char *err, size_t errlen);

/* {"result": result}; steals result (NULL means {}). */
json_t *proto_reply_result(json_t *result);
/* {"error": {"code", "name", "message"}} */
json_t *proto_reply_error(int code, const char *message);
/* Split a reply: returns 0 with *ret_result borrowed, or the error code (> 0) with the
 * message copied to err; -EBADMSG when the reply is malformed. */
int proto_reply_parse(json_t *body, json_t **ret_result, char *err, size_t errlen);

/* {"event": event, "data": data}; steals data. */
json_t *proto_notify_new(const char *event, json_t *data);

/* Parse a JSON body of len bytes (not NUL terminated), rejecting more than one value. */
json_t *proto_json_parse(const void *body, size_t len, char *err, size_t errlen);
/* Compact encoding; caller frees with free(). */
char *proto_json_dump(const json_t *v, size_t *ret_len);

#endif
