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

/// A network whose parameters are one flat tensor: what PPO steps, telemetry names, the
/// lab serves to the browser and a checkpoint stores.
pub trait Network {
    /// Every parameter, concatenated in [`Network::layout`]'s order.
    fn flat(&self) -> &tch::Tensor;
    fn layout(&self) -> &[ParamSlot];
    /// Its shape as JSON (its architecture): what the lab serves beside the parameters.
    fn shape(&self) -> serde_json::Value;
    /// The flat parameters on the host.
    fn host_params(&self) -> Vec<f32> {
        Vec::<f32>::try_from(self.flat().to_device(tch::Device::Cpu).to_kind(tch::Kind::Float)).unwrap_or_default()
    }
}

/// [`Network`] for a network type whose fields `flat` and `layout` are its parameters and
/// whose serializable `arch` is its shape; or, `flat_network!(T, params, shape)`, whose
/// [`FlatParams`] field is `params` and whose serializable shape is `shape`.
#[macro_export]
macro_rules! flat_network {
    ($network:ty, $params:ident, $shape:ident) => {
        impl $crate::params::Network for $network {
            fn flat(&self) -> &tch::Tensor {
                &self.$params.flat
            }

            fn layout(&self) -> &[$crate::params::ParamSlot] {
                &self.$params.layout
            }

            fn shape(&self) -> serde_json::Value {
                serde_json::to_value(&self.$shape).unwrap_or_default()
            }
        }
    };
    ($network:ty) => {
        impl $crate::params::Network for $network {
            fn flat(&self) -> &tch::Tensor {
                &self.flat
            }

            fn layout(&self) -> &[$crate::params::ParamSlot] {
                &self.layout
            }

            fn shape(&self) -> serde_json::Value {
                serde_json::to_value(&self.arch).unwrap_or_default()
            }
        }
    };
}

/// Slots for `(name, shape)` pairs, packed one after another.
pub fn pack(shapes: impl IntoIterator<Item = (String, Vec<i64>)>) -> Vec<ParamSlot> {
    let mut offset = 0;
    shapes
        .into_iter()
        .map(|(name, shape)| {
            let slot = ParamSlot { name, shape, offset };
            offset += slot.numel();
            slot
        })
        .collect()
}

/// A network's parameters in one flat tensor, each also a leaf view of it whose
/// gradient lands in one flat gradient tensor: autograd fills `grad`, and the clip and
/// the optimizer act on `flat` and `grad` as one vector each.
pub struct FlatParams {
    pub layout: Vec<ParamSlot>,
    pub flat: tch::Tensor,
    pub grad: tch::Tensor,
    views: Vec<tch::Tensor>,
}

impl FlatParams {
    /// `flat` (f32, as long as the layout) with its views and a zero gradient.
    pub fn new(layout: Vec<ParamSlot>, flat: tch::Tensor) -> Self {
        let flat = flat.to_kind(tch::Kind::Float).contiguous().detach();
        let mut grad = flat.zeros_like();
        let views: Vec<tch::Tensor> = layout
            .iter()
            .map(|s| flat.narrow(0, s.offset, s.numel()).view(s.shape.as_slice()).detach().set_requires_grad(true))
            .collect();
        // One backward creates every `.grad`, then each is re-pointed into `grad`.
        if !views.is_empty() {
            let touch: tch::Tensor = views.iter().map(|p| p.sum(tch::Kind::Float)).sum::<tch::Tensor>();
            touch.backward();
        }
        for (p, s) in views.iter().zip(&layout) {
            let mut g = p.grad();
            g.set_data(&grad.narrow(0, s.offset, s.numel()).view(s.shape.as_slice()));
        }
        let _ = grad.zero_();
        Self { layout, flat, grad, views }
    }

    /// Parameter `i` of the layout.
    pub fn get(&self, i: usize) -> &tch::Tensor {
        &self.views[i]
    }

    pub fn zero_grad(&mut self) {
        let _ = self.grad.zero_();
    }

    /// The layout, the flat parameters, the flat gradient and the views, for a network
    /// that keeps them in its own fields.
    pub fn into_parts(self) -> (Vec<ParamSlot>, tch::Tensor, tch::Tensor, Vec<tch::Tensor>) {
        (self.layout, self.flat, self.grad, self.views)
    }

    pub fn numel(&self) -> i64 {
        self.layout.iter().map(ParamSlot::numel).sum()
    }
}
