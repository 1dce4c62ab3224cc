//! Where each parameter of a network lives in its one flat tensor: every network keeps its
//! parameters in one flat vector (and its gradient in another), so that the optimizer, the
//! gradient clip and the telemetry act on one tensor each, whatever the workload.

/// Where one parameter lives in the flat vector.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ParamSlot {
    pub name: String,
    pub shape: Vec<i64>,
    pub offset: i64,
}

impl ParamSlot {
    pub fn numel(&self) -> i64 {
        self.shape.iter().product()
    }
}
