//! OpenAPI links: from an operation that creates something to the
//! operations that take its ID, so a reader (or a stateful fuzzer) can
//! follow a hold to its capture, a payment to its refund, an entry to its
//! reversal without reading prose.
//!
//! Written as JSON under the response's extensions, not through utoipa's
//! `Link`: utoipa 5.5 serialises that struct's fields as `operation_id`
//! and `request_body`, which OpenAPI (and every tool reading it) knows
//! only as `operationId` and `requestBody`. The extensions are flattened
//! into the response object, so the key lands where OpenAPI puts `links`;
//! it is the response's only extension, so the hash map holding it
//! cannot reorder the output from one run to the next.

use serde_json::{json, Map, Value};
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::{OpenApi, RefOr};

/// The statuses whose body is the created (or replayed) entry.
const CREATED: [&str; 2] = ["201", "200"];

/// Where a created entry's ID goes in a later operation.
struct Follow {
    name: &'static str,
    operation_id: &'static str,
    description: &'static str,
    parameter: Option<(&'static str, &'static str)>,
    body: Option<fn() -> serde_json::Value>,
}

/// `(creating operation, what follows it)`.
fn follows(operation_id: &str) -> Vec<Follow> {
    let entry = Follow {
        name: "getEntry",
        operation_id: "getEntry",
        description: "The entry, read back by its `id`.",
        parameter: Some(("id", "$response.body#/id")),
        body: None,
    };
    let reversal = Follow {
        name: "postReversal",
        operation_id: "postReversal",
        description:
            "Reverse this entry: `entry_id` is the entry's `id` (choose a new `reversal_id`).",
        parameter: None,
        body: Some(|| {
            json!({
                "reversal_id": "rev_{$response.body#/seq}",
                "entry_id": "$response.body#/id",
                "reason": "reversed"
            })
        }),
    };
    let hold = |name, operation_id, description| Follow {
        name,
        operation_id,
        description,
        parameter: Some(("hold_id", "$response.body#/upstream_id")),
        body: None,
    };
    match operation_id {
        "postUsageDebit" | "postAdjustment" | "postRefund" => vec![entry, reversal],
        "postPayment" => vec![
            entry,
            reversal,
            Follow {
                name: "postRefund",
                operation_id: "postRefund",
                description: "Refund this payment: `payment_id` is the entry's `upstream_id` \
                    (choose a new `refund_id`; at most the payment's amount in all).",
                parameter: None,
                body: Some(|| {
                    json!({
                        "refund_id": "ref_{$response.body#/seq}",
                        "payment_id": "$response.body#/upstream_id",
                        "amount": "$response.body#/amount"
                    })
                }),
            },
        ],
        "postHold" => vec![
            entry,
            hold(
                "getHold",
                "getHold",
                "The hold: its `hold_id` is the entry's `upstream_id`.",
            ),
            hold(
                "postCapture",
                "postCapture",
                "Capture this hold (choose a `capture_id`; at most the held amount).",
            ),
            hold(
                "postRelease",
                "postRelease",
                "Release this hold (choose a `release_id`).",
            ),
        ],
        "postCapture" | "postRelease" => vec![entry],
        "postWebhookEndpoint" => {
            let endpoint = |name, description| Follow {
                name,
                operation_id: name,
                description,
                parameter: Some(("id", "$response.body#/id")),
                body: None,
            };
            vec![
                endpoint("getWebhookEndpoint", "The endpoint, read back by its `id`."),
                endpoint("patchWebhookEndpoint", "Change this endpoint."),
                endpoint("deleteWebhookEndpoint", "Delete this endpoint."),
                endpoint("rotateWebhookSecret", "A new secret for this endpoint."),
                endpoint("listWebhookDeliveries", "This endpoint's deliveries."),
                endpoint("replayWebhookEvents", "Send this endpoint's events again."),
            ]
        }
        _ => Vec::new(),
    }
}

fn link(follow: &Follow) -> Value {
    let mut link = Map::new();
    link.insert("operationId".into(), follow.operation_id.into());
    if let Some((name, value)) = follow.parameter {
        link.insert("parameters".into(), json!({ name: value }));
    }
    if let Some(body) = follow.body {
        link.insert("requestBody".into(), body());
    }
    link.insert("description".into(), follow.description.into());
    Value::Object(link)
}

/// Adds the links to every creating operation's entry responses.
pub fn add(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        let Some(op) = item.post.as_mut() else {
            continue;
        };
        let Some(id) = op.operation_id.clone() else {
            continue;
        };
        let follows = follows(&id);
        if follows.is_empty() {
            continue;
        }
        let links: Map<String, Value> = follows
            .iter()
            .map(|follow| (follow.name.to_owned(), link(follow)))
            .collect();
        for status in CREATED {
            if let Some(RefOr::T(response)) = op.responses.responses.get_mut(status) {
                let extensions = response.extensions.get_or_insert_with(Extensions::default);
                extensions.insert("links".to_owned(), Value::Object(links.clone()));
            }
        }
    }
}
