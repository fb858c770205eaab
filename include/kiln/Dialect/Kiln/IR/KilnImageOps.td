//===- KilnImageOps.td - Sampling images at computed points -*- tablegen -*-===//
//
// Ops that read an [N, C, spatial...] image at coordinates computed from
// another tensor: grid sampling (GridSample), region-of-interest pooling
// (RoiAlign) and the offset sampling of deformable convolution. Each output
// element is a weighted sum of a few input elements picked at run time.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNIMAGEOPS_TD
#define KILN_DIALECT_KILN_IR_KILNIMAGEOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"

def Kiln_GridPadding : I32EnumAttr<"GridPadding",
    "what grid sampling reads outside the image", [
      I32EnumAttrCase<"Zeros", 0, "zeros">,
      I32EnumAttrCase<"Border", 1, "border">,
      I32EnumAttrCase<"Reflection", 2, "reflection">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_GridPaddingAttr : EnumAttr<Kiln_Dialect, Kiln_GridPadding, "grid_padding"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_GridSampleOp : Kiln_Op<"grid_sample", [InferTypeOpAdaptor]> {
  let summary = "sample an image at normalised grid points (ONNX GridSample)";
  let description = [{
    `input` is `[N, C, D1, ..., Dr]` and `grid` is `[N, O1, ..., Or, r]`:
    each grid entry gives a point in normalised coordinates, x first (the
    last image dimension), in [-1, 1] from the first to the last pixel
    (`align_corners`: pixel centres; otherwise the outer edges). The result
    `[N, C, O1, ..., Or]` interpolates the image there by `mode`: nearest
    (halves round to even), (multi)linear, or (bi)cubic with Keys' kernel
    (a = -0.75, 2-D only). Points outside read `padding`: zeros, the border
    pixel, or the image reflected at its edges.

    Example:

    ```mlir
    %y = kiln.grid_sample %x, %g {mode = #kiln.resize_mode<linear>,
        padding = #kiln.grid_padding<zeros>}
        : tensor<1x1x4x4xf32>, tensor<1x6x6x2xf32> -> tensor<1x1x6x6xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$grid,
                       Kiln_ResizeModeAttr:$mode,
                       DefaultValuedAttr<Kiln_GridPaddingAttr,
                           "::kiln::GridPadding::Zeros">:$padding,
                       UnitAttr:$align_corners);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grid attr-dict `:` type($input) `,` type($grid) `->` type($result)
  }];
}

def Kiln_RoiAlignOp : Kiln_Op<"roi_align", [InferTypeOpAdaptor]> {
  let summary = "pool regions of interest by bilinear sampling (ONNX RoiAlign)";
  let description = [{
    For region `r` (`rois[r] = [x1, y1, x2, y2]` in input pixels times
    `spatial_scale`, minus 0.5 with `half_pixel`) of image
    `batch_indices[r]`, splits the region into `output_height x
    output_width` bins and pools each bin's `sampling_ratio x
    sampling_ratio` bilinear samples (0: `ceil(bin size)` samples per
    side, which depends on the region) by average or max (`kind`), as
    ONNX's RoiAlign-16 reference does: samples more than a pixel outside
    the image count as 0, max pools the four weighted corners of each
    sample. Without `half_pixel`, regions are at least 1x1. The result is
    `[R, C, output_height, output_width]`.

    Example:

    ```mlir
    %y = kiln.roi_align <avg> %x, %rois, %batch {output_height = 5 : i64,
        output_width = 5 : i64, sampling_ratio = 2 : i64,
        spatial_scale = 1.0 : f32}
        : tensor<1x1x10x10xf32>, tensor<3x4xf32>, tensor<3xi64>
        -> tensor<3x1x5x5xf32>
    ```
  }];
  let arguments = (ins Kiln_PoolKindAttr:$kind, Kiln_FloatTensor:$input,
                       Kiln_FloatTensor:$rois, Kiln_IndexTensor:$batch_indices,
                       I64Attr:$output_height, I64Attr:$output_width,
                       DefaultValuedAttr<I64Attr, "0">:$sampling_ratio,
                       DefaultValuedAttr<F32Attr, "1.0f">:$spatial_scale,
                       UnitAttr:$half_pixel);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $input `,` $rois `,` $batch_indices attr-dict `:` type($input) `,`
    type($rois) `,` type($batch_indices) `->` type($result)
  }];
}

def Kiln_DeformSampleOp : Kiln_Op<"deform_sample", [InferTypeOpAdaptor]> {
  let summary = "the columns of a deformable convolution (ONNX DeformConv)";
  let description = [{
    For a 2-D convolution window of `kernel` over `input` `[N, C, H, W]`
    (with `strides`, `dilations` and `padding`: low pads, then high), reads
    every tap at its grid position plus a learned offset and scales it by a
    mask: `result[n, c, i, j, y, x] = mask[n, g*kh*kw + i*kw + j, y, x] *
    bilinear(input[n, c], py, px)` with `py = y*stride_h - pad_h + i*dil_h +
    offset[n, 2*(g*kh*kw + i*kw + j), y, x]` (`px` from the next offset
    channel) and `g` the offset group of channel `c` (`C / offset_groups`
    channels each). Bilinear reads outside the image count as 0. A
    deformable convolution is this op followed by a matmul with the
    weights.

    Example:

    ```mlir
    %cols = kiln.deform_sample %x, %off, %mask {kernel = array<i64: 2, 2>,
        strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
        padding = array<i64: 0, 0, 0, 0>, offset_groups = 1 : i64}
        : tensor<1x1x3x3xf32>, tensor<1x8x2x2xf32>, tensor<1x4x2x2xf32>
        -> tensor<1x1x2x2x2x2xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$offset,
                       Kiln_FloatTensor:$mask, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$dilations,
                       DenseI64ArrayAttr:$padding,
                       DefaultValuedAttr<I64Attr, "1">:$offset_groups);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $offset `,` $mask attr-dict `:` type($input) `,` type($offset)
    `,` type($mask) `->` type($result)
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNIMAGEOPS_TD
