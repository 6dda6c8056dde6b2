//! Fault injection for the engine's integration tests: an SDK interceptor, added to the Kinesis or
//! DynamoDB client the engine is given, that counts, fails or delays chosen requests (by operation
//! and by text in the request body) and hides shards from ListShards answers (as if the stream's
//! retention had removed them, which kinesis-local, with its 24 h minimum, cannot show).

#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::config::interceptors::{BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextMut};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use kinesnow_core::aws::AwsClients;

#[derive(Clone, Copy, Debug)]
enum Action {
    Fail,
    /// Blocks the sending thread (interceptors are synchronous); use a multi-thread runtime.
    Delay(Duration),
}

#[derive(Debug)]
struct Rule {
    operation: String,
    contains: Vec<String>,
    action: Action,
    /// Matching requests let through before the rule acts.
    skip: usize,
    /// How many more times it acts; `None`: until cleared.
    remaining: Option<usize>,
}

#[derive(Default, Debug)]
struct State {
    rules: Vec<Rule>,
    calls: HashMap<String, u64>,
    failed: HashMap<String, u64>,
    hidden_shards: BTreeSet<String>,
}

/// Shared by the test and the interceptor it installed.
#[derive(Clone, Default, Debug)]
pub struct Faults(Arc<Mutex<State>>);

impl Faults {
    /// Adds this interceptor to both clients.
    pub fn install(&self, clients: &mut AwsClients) {
        clients.kinesis =
            aws_sdk_kinesis::Client::from_conf(clients.kinesis.config().to_builder().interceptor(self.clone()).build());
        clients.dynamodb = aws_sdk_dynamodb::Client::from_conf(
            clients.dynamodb.config().to_builder().interceptor(self.clone()).build(),
        );
    }

    /// Fails every `operation` request whose body contains all of `contains`, until cleared.
    pub fn fail(&self, operation: &str, contains: &[&str]) {
        self.add(operation, contains, Action::Fail, 0, None);
    }

    /// Lets `skip` matching requests through, then fails every later one until cleared.
    pub fn fail_after(&self, operation: &str, contains: &[&str], skip: usize) {
        self.add(operation, contains, Action::Fail, skip, None);
    }

    /// Delays the next matching request.
    pub fn delay_next(&self, operation: &str, contains: &[&str], delay: Duration) {
        self.add(operation, contains, Action::Delay(delay), 0, Some(1));
    }

    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// Requests of `operation` sent so far (failed ones included).
    pub fn calls(&self, operation: &str) -> u64 {
        self.lock().calls.get(operation).copied().unwrap_or(0)
    }

    /// Requests of `operation` failed on purpose so far.
    pub fn failed(&self, operation: &str) -> u64 {
        self.lock().failed.get(operation).copied().unwrap_or(0)
    }

    /// ListShards answers leave these shards out from now on.
    pub fn hide_shards(&self, shards: &[&str]) {
        self.lock().hidden_shards.extend(shards.iter().map(|s| s.to_string()));
    }

    fn add(&self, operation: &str, contains: &[&str], action: Action, skip: usize, remaining: Option<usize>) {
        self.lock().rules.push(Rule {
            operation: operation.into(),
            contains: contains.iter().map(|s| s.to_string()).collect(),
            action,
            skip,
            remaining,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What to do with one request, counting it.
    fn decide(&self, operation: &str, body: &str) -> Option<Action> {
        let mut state = self.lock();
        *state.calls.entry(operation.to_owned()).or_default() += 1;
        let rule = state.rules.iter_mut().find(|r| {
            r.operation == operation && r.remaining != Some(0) && r.contains.iter().all(|c| body.contains(c.as_str()))
        })?;
        if rule.skip > 0 {
            rule.skip -= 1;
            return None;
        }
        if let Some(n) = rule.remaining.as_mut() {
            *n -= 1;
        }
        let action = rule.action;
        if matches!(action, Action::Fail) {
            *state.failed.entry(operation.to_owned()).or_default() += 1;
        }
        Some(action)
    }
}

/// `DynamoDB_20120810.UpdateItem` -> `UpdateItem`.
fn operation_of(target: Option<&str>) -> String {
    target.and_then(|t| t.rsplit('.').next()).unwrap_or("").to_owned()
}

impl Intercept for Faults {
    fn name(&self) -> &'static str {
        "kinesnow-test-faults"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request();
        let operation = operation_of(request.headers().get("x-amz-target"));
        let body = request.body().bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
        match self.decide(&operation, &body) {
            None => Ok(()),
            Some(Action::Fail) => Err(format!("injected failure of {operation}").into()),
            Some(Action::Delay(d)) => {
                std::thread::sleep(d);
                Ok(())
            }
        }
    }

    fn modify_before_completion(
        &self,
        context: &mut FinalizerInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let hidden = self.lock().hidden_shards.clone();
        if hidden.is_empty() {
            return Ok(());
        }
        if let Some(Ok(output)) = context.output_or_error_mut() {
            if let Some(list) = output.downcast_mut::<aws_sdk_kinesis::operation::list_shards::ListShardsOutput>() {
                if let Some(shards) = list.shards.as_mut() {
                    shards.retain(|s| !hidden.contains(s.shard_id()));
                }
            }
        }
        Ok(())
    }
}
