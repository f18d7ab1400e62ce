(* OB-BOUND-2: the bound of OB-BOUND-1 is reached, for every N >= 1, M >= 1
   and W >= 1, in the fine-grained model of Model.v (OB-MODEL-1).

   The interleaving (specs/overshoot-bound.md, "The construction that reaches
   it"), built by tight_schedule N M W, with w = min M W:
     1. alone: M - w times, server 0 starts a check of weight 1, reads all N
        slots and admits (it sees only its own slot, which it raised by one
        each time), so c_0 = M - w and nothing else is in progress;
     2. together: every server p = 0..N-1 starts a check of weight w; then
        every server reads all N slots (each sees M - w in total), before any
        decides; then every server decides, and each admits (M - w + w <= M).
   The global count is then M - w + N * w = M + (N - 1) * w.

   Theorem tight_schedule_reaches_bound: for all N >= 1, M >= 1, W >= 1, the
   schedule runs from init with the executable step function (so every
   action is enabled: the run is an execution of the step relation), its
   final state is reachable, and its global count is exactly
   M + (N - 1) * min M W.  Validity is proved for every N by induction over
   the schedule, with lemmas on the shape of the state each phase leaves.

   Corollary worst_case_exact (with Bound.ob_bound_1): for all N >= 1, M and
   W >= 1, every reachable state has global count <= M + (N - 1) * min M W,
   and some reachable state has exactly that count. *)

From Coq Require Import Arith Bool List Lia.
Import ListNotations.
From Queueref Require Import Model Bound.

(* ---- The schedule ---- *)

Definition tight_weight (M W : nat) : nat := Nat.min M W.

(* How many weight-1 requests server 0 admits alone; the mutant of
   proofs/coq/theorems.json replaces this line. *)
Definition alone_count (M W : nat) : nat := M - tight_weight M W.

Definition alone_round (N : nat) : list action :=
  Start 0 1 :: repeat (Read 0) N ++ [Decide 0].

Definition together (N w : nat) : list action :=
  map (fun p => Start p w) (seq 0 N)
  ++ flat_map (fun p => repeat (Read p) N) (seq 0 N)
  ++ map Decide (seq 0 N).

Definition tight_schedule (N M W : nat) : list action :=
  concat (repeat (alone_round N) (alone_count M W)) ++ together N (tight_weight M W).

(* ---- Helper lemmas (about Model.v's definitions; Model.v is not changed) ---- *)

Lemma tight_upd_same : forall A (f : nat -> A) i v, upd f i v i = v.
Proof. intros; unfold upd; now rewrite Nat.eqb_refl. Qed.

Lemma tight_upd_other : forall A (f : nat -> A) i v j, j <> i -> upd f i v j = f j.
Proof. intros; unfold upd; now rewrite (proj2 (Nat.eqb_neq j i) H). Qed.

Lemma tight_sum_ext : forall f g k, (forall j, j < k -> f j = g j) -> sum f k = sum g k.
Proof.
  intros f g k; induction k as [|k IH]; intros H; simpl; [reflexivity|].
  rewrite IH by (intros; apply H; lia); rewrite (H k) by lia; reflexivity.
Qed.

Lemma tight_sum_plus : forall f w k, sum (fun j => f j + w) k = sum f k + k * w.
Proof. intros f w k; induction k as [|k IH]; simpl; [reflexivity|]. rewrite IH; lia. Qed.

(* A function that is 0 except at index 0 sums to its value there. *)
Lemma tight_sum_first : forall f a k,
  (forall j, f j = if j =? 0 then a else 0) -> sum f (S k) = a.
Proof.
  intros f a k H; induction k as [|k IH].
  - simpl; rewrite (H 0); reflexivity.
  - change (sum f (S (S k))) with (sum f (S k) + f (S k)); rewrite IH, (H (S k)); simpl; lia.
Qed.

Lemma tight_run_app : forall N M W l1 l2 s,
  run N M W s (l1 ++ l2) =
  match run N M W s l1 with Some t => run N M W t l2 | None => None end.
Proof.
  intros N M W l1; induction l1 as [|a l1 IH]; intros l2 s; simpl; [reflexivity|].
  destruct (exec N M W s a); [apply IH | reflexivity].
Qed.

Lemma tight_run_one : forall N M W s a l t,
  exec N M W s a = Some t -> run N M W s (a :: l) = run N M W t l.
Proof. intros N M W s a l t H; cbn [run]; rewrite H; reflexivity. Qed.

(* Decide every comparison in the goal that lia can decide. *)
Ltac cmp_simpl :=
  repeat match goal with
  | |- context [?a <? ?b] =>
      first [ rewrite (proj2 (Nat.ltb_lt a b)) by lia
            | rewrite (proj2 (Nat.ltb_ge a b)) by lia ]
  | |- context [?a <=? ?b] =>
      first [ rewrite (proj2 (Nat.leb_le a b)) by lia
            | rewrite (proj2 (Nat.leb_gt a b)) by lia ]
  end.

Ltac upd_simpl :=
  repeat first [ rewrite tight_upd_same | rewrite tight_upd_other by lia ].

Section Tight.
  Variables N M W : nat.

  (* m reads by p, from a check whose view is the sum of the slots it has
     read, leave its view the sum of the first (next + m) slots. *)
  Lemma tight_reads : forall m t p c,
    p < N -> checks t p = Some c -> ck_next c + m <= N ->
    ck_view c = sum (slots t) (ck_next c) ->
    exists t', run N M W t (repeat (Read p) m) = Some t' /\ slots t' = slots t /\
      checks t' p = Some (mk_check (ck_n c) (ck_next c + m) (sum (slots t) (ck_next c + m))) /\
      (forall q, q <> p -> checks t' q = checks t q).
  Proof.
    induction m as [|m IH]; intros t p c Hp Hc Hk Hv.
    - exists t; simpl; repeat split.
      rewrite Hc, Nat.add_0_r, <- Hv; destruct c; reflexivity.
    - simpl. unfold exec; cmp_simpl; rewrite Hc; cmp_simpl.
      set (c1 := mk_check (ck_n c) (next_slot (ck_next c))
                   (accumulate (ck_view c) (slots t (ck_next c)))).
      assert (Hc1 : checks (after_read t p c) p = Some c1)
        by (unfold after_read; cbn [checks]; upd_simpl; reflexivity).
      assert (Hk1 : ck_next c1 + m <= N) by (cbn [c1 ck_next]; unfold next_slot; lia).
      assert (Hv1 : ck_view c1 = sum (slots (after_read t p c)) (ck_next c1))
        by (cbn [c1 ck_view ck_next after_read slots]; unfold accumulate, next_slot;
            rewrite Hv; reflexivity).
      destruct (IH (after_read t p c) p c1 Hp Hc1 Hk1 Hv1) as (t' & Hrun & Hs & Hcp & Ho).
      unfold after_read, c1, next_slot, accumulate in *; cbn [slots checks ck_n ck_next ck_view] in *.
      exists t'; repeat split; try assumption.
      + replace (ck_next c + S m) with (S (ck_next c) + m) by lia; exact Hcp.
      + intros q Hq; rewrite (Ho q Hq); upd_simpl; reflexivity.
  Qed.

  (* Phase 1: alone_round from "no check, only slot 0 holds i" admits one more. *)
  Definition alone_shape (i : nat) (t : state) : Prop :=
    (forall q, checks t q = None) /\ (forall q, slots t q = if q =? 0 then i else 0).

  Lemma tight_round : forall i t, 1 <= N -> 1 <= W -> i + 1 <= M -> alone_shape i t ->
    exists t', run N M W t (alone_round N) = Some t' /\ alone_shape (i + 1) t'.
  Proof.
    intros i t HN HW Hi [Hc Hs].
    unfold alone_round.
    rewrite (tight_run_one N M W t (Start 0 1) _ (after_start t 0 1))
      by (unfold exec; cmp_simpl; rewrite (Hc 0); reflexivity).
    rewrite tight_run_app.
    assert (Hc1 : checks (after_start t 0 1) 0 = Some (mk_check 1 first_slot 0))
      by (unfold after_start; cbn [checks]; upd_simpl; reflexivity).
    destruct (tight_reads N (after_start t 0 1) 0 (mk_check 1 first_slot 0)
                ltac:(lia) Hc1 ltac:(unfold first_slot; cbn; lia) ltac:(reflexivity))
      as (t2 & Hrun & Hs2 & Hc2 & Ho2).
    unfold after_start, first_slot in *; cbn [slots checks ck_n ck_next ck_view] in *.
    rewrite Nat.add_0_l in Hc2. rewrite Hrun; cbv beta iota.
    assert (Hsum : sum (slots t) N = i).
    { destruct N as [|N']; [lia|]. apply tight_sum_first; exact Hs. }
    rewrite (tight_run_one N M W t2 (Decide 0) _ (after_admit t2 0 (mk_check 1 N i)))
      by (unfold exec; cmp_simpl; rewrite Hc2, Hsum; cbn [ck_next ck_view ck_n];
          unfold admits; cmp_simpl; reflexivity).
    eexists; split; [reflexivity|]. unfold after_admit; split; intros q; cbn [slots checks].
    - destruct (Nat.eq_dec q 0) as [->|Hq]; upd_simpl; [reflexivity|].
      rewrite (Ho2 q Hq); upd_simpl; apply Hc.
    - rewrite Hs2. destruct (Nat.eq_dec q 0) as [->|Hq]; upd_simpl.
      + rewrite (Hs 0); simpl; lia.
      + rewrite (Hs q); destruct (Nat.eqb_spec q 0); [lia | reflexivity].
  Qed.

  Lemma tight_alone : forall k i t, 1 <= N -> 1 <= W -> i + k <= M -> alone_shape i t ->
    exists t', run N M W t (concat (repeat (alone_round N) k)) = Some t' /\
      alone_shape (i + k) t'.
  Proof.
    induction k as [|k IH]; intros i t HN HW Hk Ht.
    - exists t; rewrite Nat.add_0_r; split; [reflexivity | exact Ht].
    - cbn [repeat concat]; rewrite tight_run_app.
      destruct (tight_round i t HN HW ltac:(lia) Ht) as (t1 & Hr1 & Ht1); rewrite Hr1.
      destruct (IH (i + 1) t1 HN HW ltac:(lia) Ht1) as (t2 & Hr2 & Ht2).
      exists t2; split; [exact Hr2|]. replace (i + S k) with (i + 1 + k) by lia; exact Ht2.
  Qed.

  (* Phase 2a: servers 0..k-1 start a check of weight w. *)
  Lemma tight_starts : forall w k s, k <= N -> 1 <= w -> w <= W ->
    (forall q, q < N -> checks s q = None) ->
    exists t, run N M W s (map (fun p => Start p w) (seq 0 k)) = Some t /\
      slots t = slots s /\
      (forall q, q < N -> checks t q = if q <? k then Some (mk_check w first_slot 0) else None).
  Proof.
    intros w k s; induction k as [|k IH]; intros Hk Hw1 HwW Hs.
    - exists s; repeat split; intros q Hq; simpl; apply Hs; exact Hq.
    - rewrite seq_S, map_app, tight_run_app.
      destruct (IH ltac:(lia) Hw1 HwW Hs) as (t & Hr & Hsl & Hc); rewrite Hr; cbv beta iota; cbn [map flat_map Nat.add].
      rewrite (tight_run_one N M W t (Start k w) _ (after_start t k w))
        by (unfold exec; cmp_simpl; rewrite (Hc k) by lia; cmp_simpl; reflexivity).
      eexists; split; [reflexivity|]. split; [exact Hsl|].
      intros q Hq; unfold after_start; cbn [checks].
      destruct (Nat.eq_dec q k) as [->|Hqk]; upd_simpl; cmp_simpl; [reflexivity|].
      rewrite (Hc q Hq); destruct (Nat.ltb_spec q k); cmp_simpl; reflexivity.
  Qed.

  (* Phase 2b: servers 0..k-1 read all N slots, none decides. *)
  Lemma tight_all_read : forall w k s, k <= N ->
    (forall q, q < N -> checks s q = Some (mk_check w first_slot 0)) ->
    exists t, run N M W s (flat_map (fun p => repeat (Read p) N) (seq 0 k)) = Some t /\
      slots t = slots s /\
      (forall q, q < N -> checks t q =
         Some (if q <? k then mk_check w N (sum (slots s) N) else mk_check w first_slot 0)).
  Proof.
    intros w k s; induction k as [|k IH]; intros Hk Hs.
    - exists s; repeat split; intros q Hq; simpl; apply Hs; exact Hq.
    - rewrite seq_S, flat_map_app, tight_run_app.
      destruct (IH ltac:(lia) Hs) as (t & Hr & Hsl & Hc); rewrite Hr; cbv beta iota; cbn [map flat_map Nat.add].
      rewrite app_nil_r.
      assert (Hck : checks t k = Some (mk_check w first_slot 0)) by
        (rewrite (Hc k) by lia; cmp_simpl; reflexivity).
      destruct (tight_reads N t k (mk_check w first_slot 0) ltac:(lia) Hck
                  ltac:(unfold first_slot; cbn; lia) ltac:(reflexivity))
        as (t' & Hr' & Hsl' & Hc' & Ho').
      unfold first_slot in *; cbn [ck_n ck_next ck_view] in *; rewrite Nat.add_0_l in Hc'.
      exists t'; split; [exact Hr'|]. split; [congruence|].
      intros q Hq. destruct (Nat.eq_dec q k) as [->|Hqk].
      + rewrite Hc', Hsl; cmp_simpl; reflexivity.
      + rewrite (Ho' q Hqk), (Hc q Hq). destruct (Nat.ltb_spec q k); cmp_simpl; reflexivity.
  Qed.

  (* Phase 2c: servers 0..k-1 decide; each admits, its view V plus w fits M. *)
  Lemma tight_decides : forall w V k s, k <= N -> V + w <= M ->
    (forall q, q < N -> checks s q = Some (mk_check w N V)) ->
    exists t, run N M W s (map Decide (seq 0 k)) = Some t /\
      (forall q, q < N -> slots t q = (if q <? k then slots s q + w else slots s q) /\
                          checks t q = (if q <? k then None else checks s q)).
  Proof.
    intros w V k s; induction k as [|k IH]; intros Hk Hfit Hs.
    - exists s; split; [reflexivity|]. intros q Hq; simpl; split; reflexivity.
    - rewrite seq_S, map_app, tight_run_app.
      destruct (IH ltac:(lia) Hfit Hs) as (t & Hr & Ht); rewrite Hr; cbv beta iota; cbn [map flat_map Nat.add].
      destruct (Ht k ltac:(lia)) as [Hsk Hck]. revert Hck; cmp_simpl; intros Hck.
      rewrite (tight_run_one N M W t (Decide k) _ (after_admit t k (mk_check w N V)))
        by (unfold exec; cmp_simpl; rewrite Hck, (Hs k) by lia; cbn [ck_next ck_view ck_n];
            cmp_simpl; unfold admits; cmp_simpl; reflexivity).
      eexists; split; [reflexivity|]. intros q Hq; unfold after_admit; cbn [slots checks].
      destruct (Nat.eq_dec q k) as [->|Hqk]; upd_simpl.
      + rewrite Hsk; cmp_simpl; split; reflexivity.
      + destruct (Ht q Hq) as [Hsq Hcq]; rewrite Hsq, Hcq.
        destruct (Nat.ltb_spec q k); cmp_simpl; split; reflexivity.
  Qed.
End Tight.

(* OB-BOUND-2 *)
Theorem tight_schedule_reaches_bound : forall N M W, 1 <= N -> 1 <= M -> 1 <= W ->
  exists s, run N M W init (tight_schedule N M W) = Some s /\ reachable N M W s /\
    total N s = M + (N - 1) * Nat.min M W.
Proof.
  intros N M W HN HM HW.
  assert (Hw1 : 1 <= tight_weight M W) by (unfold tight_weight; lia).
  assert (HwM : tight_weight M W <= M) by (unfold tight_weight; lia).
  assert (HwW : tight_weight M W <= W) by (unfold tight_weight; lia).
  set (w := tight_weight M W) in *.
  (* phase 1: server 0 alone, up to c_0 = M - w *)
  destruct (tight_alone N M W (alone_count M W) 0 init HN HW ltac:(unfold alone_count; fold w; lia))
    as (s1 & Hr1 & Hc1 & Hs1).
  { split; intros q; cbn; [reflexivity | destruct q; reflexivity]. }
  assert (Hsum1 : sum (slots s1) N = alone_count M W).
  { destruct N as [|N']; [lia|]. apply tight_sum_first; intros q; rewrite (Hs1 q); reflexivity. }
  (* phase 2: all start, all read, all decide; each view is M - w, so each admits *)
  destruct (tight_starts N M W w N s1 (le_n N) Hw1 HwW (fun q _ => Hc1 q))
    as (s2 & Hr2 & Hsl2 & Hc2).
  destruct (tight_all_read N M W w N s2 (le_n N)
              ltac:(intros q Hq; rewrite (Hc2 q Hq); cmp_simpl; reflexivity))
    as (s3 & Hr3 & Hsl3 & Hc3).
  destruct (tight_decides N M W w (sum (slots s2) N) N s3 (le_n N)
              ltac:(rewrite Hsl2, Hsum1; unfold alone_count; fold w; lia)
              ltac:(intros q Hq; rewrite (Hc3 q Hq); cmp_simpl; reflexivity))
    as (s4 & Hr4 & Ht4).
  assert (Hrun : run N M W init (tight_schedule N M W) = Some s4).
  { unfold tight_schedule, together; fold w.
    rewrite tight_run_app, Hr1; cbv beta iota.
    rewrite tight_run_app, Hr2; cbv beta iota.
    rewrite tight_run_app, Hr3; cbv beta iota.
    exact Hr4. }
  exists s4; split; [exact Hrun|]. split.
  - exact (run_init_reachable N M W (tight_schedule N M W) s4 Hrun).
  - unfold total.
    rewrite (tight_sum_ext (slots s4) (fun j => slots s1 j + w) N).
    + rewrite tight_sum_plus, Hsum1. unfold alone_count; fold w.
      destruct N as [|N']; [lia|]. unfold w, tight_weight. simpl. lia.
    + intros j Hj. destruct (Ht4 j Hj) as [Hs4 _]. rewrite Hs4, Hsl3, Hsl2. cmp_simpl. reflexivity.
Qed.

(* OB-BOUND-1 and OB-BOUND-2 together: for every N >= 1, M and W >= 1 the
   worst global count over all reachable states is exactly
   M + (N - 1) * min M W (for M = 0 the bound is 0, the count of init). *)
Lemma tight_sum_zero : forall k, sum (fun _ => 0) k = 0.
Proof. induction k as [|k IH]; simpl; [reflexivity | rewrite IH; reflexivity]. Qed.

Corollary worst_case_exact : forall N M W, 1 <= N -> 1 <= W ->
  (forall s, reachable N M W s -> total N s <= M + (N - 1) * Nat.min M W) /\
  (exists s, reachable N M W s /\ total N s = M + (N - 1) * Nat.min M W).
Proof.
  intros N M W HN HW; split; [exact (ob_bound_1 N M W)|].
  destruct M as [|M'].
  - exists init; split; [constructor|].
    unfold total; cbn [slots init]; rewrite tight_sum_zero; simpl; lia.
  - destruct (tight_schedule_reaches_bound N (S M') W HN ltac:(lia) HW) as (s & _ & Hr & Ht).
    exists s; split; [exact Hr | exact Ht].
Qed.

(* Instances, by computation: N = 3, M = 2, W = 1 ends with slots [2; 1; 1],
   total 4 = 2 + 2 * 1 (the example of specs/overshoot-bound.md); N = 4, M = 3,
   W = 2 ends with [3; 2; 2; 2], total 9 = 3 + 3 * 2. *)
Example tight_3_2_1 :
  option_map (fun s => (observe 3 s, total 3 s)) (run 3 2 1 init (tight_schedule 3 2 1))
  = Some (([2; 1; 1], [None; None; None]), 4).
Proof. vm_compute; reflexivity. Qed.

Example tight_4_3_2 :
  option_map (fun s => (observe 4 s, total 4 s)) (run 4 3 2 init (tight_schedule 4 3 2))
  = Some (([3; 2; 2; 2], [None; None; None; None]), 9).
Proof. vm_compute; reflexivity. Qed.

Print Assumptions tight_schedule_reaches_bound.
Print Assumptions worst_case_exact.
